//! Conversation datasets: ShareGPT (`conversations` of `{from, value}`, a JSON array or JSONL)
//! and OpenAI chat (`messages` of `{role, content}`, JSONL) read into [`Conversation`]s, every
//! error with the file, the line and the JSON path of what is wrong. The whole file is read and
//! checked before anything is sent.
//!
//! A conversation is its leading system messages, then user turns each followed by the
//! recorded assistant answer (the last user turn may have none). What the runner makes of it
//! (sessions, or first turns only) is [`crate::session`].

use std::path::Path;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::workload::{DatasetError, dataset_lines, json_error};

pub use crate::config::ConversationFormat;

/// One user turn and the answer the dataset recorded for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exchange {
    pub user: String,
    /// The recorded assistant answer (None: the conversation ends on this user turn).
    pub answer: Option<String>,
}

/// One conversation of a dataset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conversation {
    /// The system messages before the first user turn, in order.
    pub system: Vec<String>,
    pub turns: Vec<Exchange>,
    /// The 1-based line the conversation starts on.
    pub line: usize,
}

/// Who wrote a message, in the words of either format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    System,
    User,
    Assistant,
}

/// The conversations of a dataset file's text. A text whose first non-blank character is `[`
/// is one JSON array (ShareGPT's usual file); anything else is JSONL (blank lines and `//`
/// comments skipped).
pub fn parse_conversations(
    path: &Path,
    text: &str,
    format: ConversationFormat,
) -> Result<Vec<Conversation>, DatasetError> {
    let mut out = Vec::new();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with('[') {
        let elements: Vec<&RawValue> = serde_json::from_str(text).map_err(|e| {
            DatasetError::at(path, e.line(), format!("not a valid JSON array: {}", json_error(&e)))
        })?;
        for (i, raw) in elements.iter().enumerate() {
            let offset = raw.get().as_ptr() as usize - text.as_ptr() as usize;
            let line = text[..offset].matches('\n').count() + 1;
            // The array's elements are only checked as JSON text above: nesting is counted here.
            let v: Value = serde_json::from_str(raw.get()).map_err(|e| {
                let line = line + e.line().saturating_sub(1);
                DatasetError::at(path, line, format!("[{i}]: not valid JSON: {}", json_error(&e)))
            })?;
            out.push(conversation(path, line, &format!("[{i}]"), &v, format)?);
        }
    } else {
        for (line, l) in dataset_lines(text) {
            let v: Value = serde_json::from_str(l).map_err(|e| {
                DatasetError::at(path, line, format!("not valid JSON: {}", json_error(&e)))
            })?;
            out.push(conversation(path, line, "", &v, format)?);
        }
    }
    if out.is_empty() {
        return Err(DatasetError::at(path, 0, "the dataset has no conversations".into()));
    }
    Ok(out)
}

/// One record as a conversation; `at` is its JSON path prefix (`[3]` in an array, empty on a
/// JSONL line).
fn conversation(
    path: &Path,
    line: usize,
    at: &str,
    v: &Value,
    format: ConversationFormat,
) -> Result<Conversation, DatasetError> {
    let err = |where_: String, message: &str| {
        let where_ = where_.trim_start_matches('.').to_string();
        let sep = if where_.is_empty() { "" } else { ": " };
        DatasetError::at(path, line, format!("{where_}{sep}{message}"))
    };
    let Some(obj) = v.as_object() else {
        return Err(err(at.to_string(), "expected a JSON object"));
    };
    let format = match format {
        ConversationFormat::Auto if obj.contains_key("conversations") => {
            ConversationFormat::Sharegpt
        }
        ConversationFormat::Auto if obj.contains_key("messages") => ConversationFormat::Openai,
        ConversationFormat::Auto => {
            return Err(err(
                at.to_string(),
                "expected `conversations` (ShareGPT) or `messages` (OpenAI)",
            ));
        }
        f => f,
    };
    let (list_key, role_key, text_key) = match format {
        ConversationFormat::Sharegpt => ("conversations", "from", "value"),
        _ => ("messages", "role", "content"),
    };
    let list_at = format!("{at}.{list_key}");
    let list = match obj.get(list_key) {
        Some(Value::Array(l)) if !l.is_empty() => l,
        Some(_) => return Err(err(list_at, "must be a non-empty array")),
        None => return Err(err(at.to_string(), &format!("needs `{list_key}`"))),
    };
    let mut messages = Vec::with_capacity(list.len());
    for (k, m) in list.iter().enumerate() {
        let m_at = format!("{list_at}[{k}]");
        let role = match m.get(role_key).and_then(Value::as_str) {
            Some(r) => role_of(r).ok_or_else(|| {
                let valid = match format {
                    ConversationFormat::Sharegpt => "human, gpt or system",
                    _ => "system, user or assistant",
                };
                err(format!("{m_at}.{role_key}"), &format!("expected {valid}, got `{r}`"))
            })?,
            None => return Err(err(m_at, &format!("needs `{role_key}` (a string)"))),
        };
        let text = match m.get(text_key) {
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(err(format!("{m_at}.{text_key}"), "must be a string")),
            None => return Err(err(m_at, &format!("needs `{text_key}` (a string)"))),
        };
        messages.push((role, text, m_at));
    }
    let mut system = Vec::new();
    let mut turns: Vec<Exchange> = Vec::new();
    let mut expect = Role::User;
    for (role, text, m_at) in messages {
        match role {
            Role::System if turns.is_empty() => system.push(text),
            Role::System => {
                return Err(err(m_at, "a system message is allowed only before the first turn"));
            }
            _ if role != expect => {
                let want = if expect == Role::User { "a user" } else { "an assistant" };
                return Err(err(
                    m_at,
                    &format!("expected {want} message: turns alternate, user first"),
                ));
            }
            Role::User => {
                turns.push(Exchange { user: text, answer: None });
                expect = Role::Assistant;
            }
            Role::Assistant => {
                turns.last_mut().expect("a user turn came first").answer = Some(text);
                expect = Role::User;
            }
        }
    }
    if turns.is_empty() {
        return Err(err(list_at, "has no user turn"));
    }
    Ok(Conversation { system, turns, line })
}

fn role_of(name: &str) -> Option<Role> {
    match name {
        "system" => Some(Role::System),
        "human" | "user" => Some(Role::User),
        "gpt" | "assistant" | "chatgpt" => Some(Role::Assistant),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Conversation>, DatasetError> {
        parse_conversations(Path::new("c.json"), text, ConversationFormat::Auto)
    }

    #[test]
    fn sharegpt_array_and_openai_lines_read_the_same_conversation() {
        let array = "[\n  {\"id\": \"a\", \"conversations\": [\n    {\"from\": \"system\", \"value\": \"be brief\"},\n    {\"from\": \"human\", \"value\": \"hi\"},\n    {\"from\": \"gpt\", \"value\": \"hello there\"},\n    {\"from\": \"human\", \"value\": \"bye\"}]},\n  {\"conversations\": [{\"from\": \"human\", \"value\": \"x\"}, {\"from\": \"gpt\", \"value\": \"y\"}]}\n]";
        let a = parse(array).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].system, vec!["be brief".to_string()]);
        assert_eq!(
            a[0].turns,
            vec![
                Exchange { user: "hi".into(), answer: Some("hello there".into()) },
                Exchange { user: "bye".into(), answer: None },
            ]
        );
        assert_eq!((a[0].line, a[1].line), (2, 7));
        let lines = "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"hello there\"}, {\"role\": \"user\", \"content\": \"bye\"}]}\n\n{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"y\"}]}\n";
        let o = parse(lines).unwrap();
        assert_eq!(
            (o[0].system.clone(), o[0].turns.clone()),
            (a[0].system.clone(), a[0].turns.clone())
        );
        assert_eq!((o[0].line, o[1].line), (1, 3));
    }

    #[test]
    fn nesting_past_the_bound_is_a_located_error_never_a_panic() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        // The bound is serde_json's recursion limit, exactly.
        let depth = crate::config::limits::MAX_JSON_DEPTH;
        assert!(serde_json::from_str::<Value>(&deep(depth)).is_ok());
        assert!(serde_json::from_str::<Value>(&deep(depth + 1)).is_err());
        // A 400 KB nested array inside a ShareGPT array, on its third line.
        let text = format!(
            "[\n{{\"conversations\": [{{\"from\": \"human\", \"value\": \"a\"}}]}},\n{}\n]",
            deep(200_000)
        );
        let e = parse(&text).unwrap_err().to_string();
        assert!(
            e.starts_with("c.json:3: [1]: not valid JSON: nested deeper than 127"),
            "{}",
            &e[..200.min(e.len())]
        );
        let e = parse(&format!("{{\"messages\": {}}}\n", deep(500))).unwrap_err().to_string();
        assert!(e.starts_with("c.json:1: not valid JSON: nested deeper than 127"), "{e}");
        // A byte order mark before the array is skipped.
        let bom = "\u{feff}[{\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}]}]";
        assert_eq!(parse(bom).unwrap().len(), 1);
    }

    #[test]
    fn malformed_records_name_the_file_the_line_and_the_json_path() {
        let cases: [(&str, &str); 9] = [
            (
                "[\n {\"conversations\": []}\n]",
                "c.json:2: [0].conversations: must be a non-empty array",
            ),
            (
                "[{\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}]},\n {\"conversations\": [{\"from\": \"bot\", \"value\": \"b\"}]}]",
                "c.json:2: [1].conversations[0].from: expected human, gpt or system, got `bot`",
            ),
            ("[{\"conversations\": [{\"from\": \"human\"}]}", "c.json:1: not a valid JSON array"),
            (
                "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}\n{\"messages\": [{\"role\": \"user\", \"content\": [1]}]}",
                "c.json:2: messages[0].content: must be a string",
            ),
            (
                "{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\"}]}",
                "c.json:1: messages[0]: expected a user message: turns alternate, user first",
            ),
            (
                "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"user\", \"content\": \"b\"}]}",
                "c.json:1: messages[1]: expected an assistant message",
            ),
            (
                "{\"prompt\": \"a\"}",
                "c.json:1: expected `conversations` (ShareGPT) or `messages` (OpenAI)",
            ),
            (
                "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}]}",
                "c.json:1: messages: has no user turn",
            ),
            ("// only a comment\n\n", "c.json:0: the dataset has no conversations"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text}\n got: {e}\nwant: {want}");
        }
        let e = parse_conversations(
            Path::new("c.json"),
            "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}",
            ConversationFormat::Sharegpt,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "c.json:1: needs `conversations`");
    }
}
