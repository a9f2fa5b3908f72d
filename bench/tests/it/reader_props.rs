//! Property tests of every reader of a workload file: the three trace formats (Mooncake JSONL,
//! BurstGPT CSV, infergate JSONL) and their replay schedule, the conversation datasets
//! (ShareGPT, OpenAI), JSONL datasets, acceptance datasets and empirical length files. Any text
//! (fragments of valid records, huge and negative numbers, quotes, commas, byte order marks,
//! deep nesting) is read without a panic, and an error names the file (and, where the reader
//! has lines, the line).

use std::path::Path;

use infergate_model::config::{ConversationFormat, TraceFormat, WorkloadConfig};
use proptest::prelude::*;

/// Pieces of the formats' records and of what breaks them.
const FRAGMENTS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ",",
    ":",
    "\n",
    "\r\n",
    " ",
    "\u{feff}",
    "//",
    "#",
    "0",
    "1",
    "-1",
    "1.5",
    "1e300",
    "-1e300",
    "4e10",
    "2.592e10",
    "18446744073709551616",
    "NaN",
    "null",
    "true",
    "\"x\"",
    "\"GPT,4\"",
    "\"a\"\"b\"",
    "\"timestamp\"",
    "\"input_length\"",
    "\"output_length\"",
    "\"hash_ids\"",
    "\"timestamp_ms\"",
    "\"input_tokens\"",
    "\"output_tokens\"",
    "\"prompt\"",
    "\"max_tokens\"",
    "\"conversations\"",
    "\"messages\"",
    "\"from\"",
    "\"value\"",
    "\"role\"",
    "\"content\"",
    "\"human\"",
    "\"gpt\"",
    "\"user\"",
    "\"assistant\"",
    "\"system\"",
    "\"schema\"",
    "Timestamp",
    "Request tokens",
    "Response tokens",
    "Model",
    "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 2, \"hash_ids\": [1]}\n",
    "{\"timestamp_ms\": 1e12, \"input_tokens\": 5, \"output_tokens\": 2}\n",
    "Timestamp,Model,Request tokens,Response tokens\n",
    "5,\"GPT,4\",10,2\n",
    "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n",
    "[{\"conversations\": [{\"from\": \"human\", \"value\": \"hi\"}]}]",
    "{\"prompt\": \"hi\", \"max_tokens\": 4}\n",
];

/// A text of fragments, sometimes with a deeply nested array in it.
fn text() -> impl Strategy<Value = String> {
    let pieces = prop::collection::vec(prop::sample::select(FRAGMENTS), 0..48);
    (pieces, prop::option::of(1usize..400), any::<u8>()).prop_map(|(pieces, deep, at)| {
        let mut out = pieces.concat();
        if let Some(n) = deep {
            let cut = (at as usize % (out.len() + 1)).min(out.len());
            let cut = (0..=cut).rev().find(|i| out.is_char_boundary(*i)).unwrap_or(0);
            out.insert_str(cut, &format!("{}{}", "[".repeat(n), "]".repeat(n)));
        }
        out
    })
}

/// An error of a reader of `file` names it first.
fn located(err: impl std::fmt::Display, file: &str) -> Result<(), TestCaseError> {
    let e = err.to_string();
    prop_assert!(e.starts_with(&format!("{file}:")), "{}", e);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn traces_never_panic_and_errors_name_file_and_line(
        text in text(),
        format in prop::sample::select(vec![
            TraceFormat::Auto, TraceFormat::Mooncake, TraceFormat::Burstgpt, TraceFormat::Infergate,
        ]),
        scale in prop::sample::select(vec![1e-3, 0.25, 1.0, 1000.0]),
        max_rate in prop::option::of(prop::sample::select(vec![1e-3, 1.0, 1e6])),
    ) {
        let file = if format == TraceFormat::Burstgpt { "t.csv" } else { "t.jsonl" };
        match infergate_model::trace::Trace::parse(Path::new(file), &text, format) {
            Ok(t) => {
                let origin = t.records[0].timestamp_ms;
                match t.replay_offsets(Path::new(file), origin, scale, max_rate) {
                    // What the runner turns into instants: each a Duration without a panic.
                    Ok(offsets) => {
                        for o in offsets {
                            let _ = std::time::Duration::from_secs_f64(o / 1e3);
                        }
                    }
                    Err(e) => located(e, file)?,
                }
            }
            Err(e) => located(e, file)?,
        }
    }

    #[test]
    fn conversations_never_panic_and_errors_name_the_file(
        text in text(),
        format in prop::sample::select(vec![
            ConversationFormat::Auto, ConversationFormat::Sharegpt, ConversationFormat::Openai,
        ]),
    ) {
        if let Err(e) = infergate_model::import::parse_conversations(Path::new("c.json"), &text, format) {
            located(e, "c.json")?;
        }
    }

    #[test]
    fn datasets_and_length_files_never_panic_and_errors_name_the_file(text in text()) {
        let cfg = WorkloadConfig::default();
        if let Err(e) = infergate_model::workload::Workload::from_jsonl(Path::new("d.jsonl"), &text, &cfg) {
            located(e, "d.jsonl")?;
        }
        if let Err(e) = bench::accept::dataset::parse(Path::new("a.jsonl"), &text, 64) {
            located(e, "a.jsonl")?;
        }
        if let Err(e) = infergate_model::lengths::parse_lengths(Path::new("l.txt"), &text) {
            located(e, "l.txt")?;
        }
    }
}
