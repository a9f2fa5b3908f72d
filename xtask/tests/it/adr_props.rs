//! The record parser over arbitrary and mutated markdown: it never panics, and every problem it
//! reports names the record's file and a line the text has.

use std::path::Path;

use proptest::prelude::*;
use xtask::adr::parse_adr;

/// A real record (the repository's first), the seed of the mutations.
const RECORD: &str =
    include_str!("../../../docs/adr/0001-govern-inference-parameters-with-decision-records.md");

/// Fragments of record syntax that mutations splice in.
const FRAGMENTS: &[&str] = &[
    "---",
    "## Status",
    "## Thresholds",
    "| metric | comparator | limit | unit | action |",
    "|---|---|---|---|---|",
    "| metrics.ttft_ms.p99 | <= | 1e400 | ms | block |",
    "| x | ~ | NaN | furlongs | maybe |",
    "Status: Accepted",
    "**Status:** Superseded by [ADR-9999](9999-x.md)",
    "Date: 2025-13-45",
    "`engine.max_num_seqs`: 1 -> 2",
    "Decision: engine. = ",
    "```",
    "<!--",
    "[ADR-0](",
    "> **SLO missed:**",
    "SLO exception:",
    "\u{feff}\u{200b}é\r",
    "",
];

/// One edit of a record's lines.
#[derive(Clone, Debug)]
enum Edit {
    Delete(usize),
    Duplicate(usize),
    Insert(usize, String),
    Replace(usize, String),
    Cut(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let text =
        prop_oneof![proptest::sample::select(FRAGMENTS).prop_map(str::to_string), ".{0,40}",];
    prop_oneof![
        any::<usize>().prop_map(Edit::Delete),
        any::<usize>().prop_map(Edit::Duplicate),
        (any::<usize>(), text.clone()).prop_map(|(i, t)| Edit::Insert(i, t)),
        (any::<usize>(), text).prop_map(|(i, t)| Edit::Replace(i, t)),
        (any::<usize>(), any::<usize>()).prop_map(|(i, at)| Edit::Cut(i, at)),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for e in edits {
        let n = lines.len().max(1);
        match e {
            Edit::Delete(i) if !lines.is_empty() => {
                lines.remove(i % n);
            }
            Edit::Duplicate(i) if !lines.is_empty() => {
                let l = lines[i % n].clone();
                lines.insert(i % n, l);
            }
            Edit::Insert(i, t) => lines.insert(i % (lines.len() + 1), t.clone()),
            Edit::Replace(i, t) if !lines.is_empty() => lines[i % n] = t.clone(),
            Edit::Cut(i, at) if !lines.is_empty() => {
                let l = &mut lines[i % n];
                let cut = l.char_indices().map(|(b, _)| b).nth(at % (l.chars().count() + 1));
                l.truncate(cut.unwrap_or(l.len()));
            }
            _ => {}
        }
    }
    lines.join("\n")
}

/// Every problem names `path` and a line of `text` (1-based; one past the end for a problem of
/// the whole record's end).
fn check_problems(path: &Path, text: &str) -> Result<(), TestCaseError> {
    let adr = parse_adr(path, text);
    let lines = text.split('\n').count();
    for p in &adr.problems {
        prop_assert_eq!(&p.path, path, "{:?}", p);
        prop_assert!(p.line >= 1 && p.line <= lines + 1, "line {} of {}: {:?}", p.line, lines, p);
        prop_assert!(!p.message.trim().is_empty(), "{:?}", p);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mutated_records_parse_without_panics_and_problems_name_file_and_line(
        edits in proptest::collection::vec(edit(), 1..12),
    ) {
        let path = Path::new("docs/adr/0042-mutated.md");
        check_problems(path, &apply(RECORD, &edits))?;
    }

    #[test]
    fn arbitrary_text_parses_without_panics(text in "(?s).{0,400}") {
        check_problems(Path::new("docs/adr/0007-arbitrary.md"), &text)?;
    }

    #[test]
    fn crlf_and_front_matter_variants_parse_without_panics(
        edits in proptest::collection::vec(edit(), 0..6),
        crlf in any::<bool>(),
    ) {
        let mut text = format!("---\nstatus: Accepted\ndate: 2025-01-01\n---\n{}", apply(RECORD, &edits));
        if crlf {
            text = text.replace('\n', "\r\n");
        }
        check_problems(Path::new("docs/adr/0043-front.md"), &text)?;
    }
}
