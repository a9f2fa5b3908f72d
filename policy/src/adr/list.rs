//! `adr list`: the records as a table or as JSON, and (`--exempt`) the governed values that no
//! live record names. Pure functions over parsed records and flattened governed files; the
//! command in [`super`] reads them.

use std::collections::BTreeMap;

use serde_json::json;

use super::check::semdiff::{inline, same_value};
use super::live::{is_live, superseded_parts};
use super::model::{Adr, AdrStatus, Decided, LinkKind};
use crate::console::ConsoleTable;
use crate::text::BLANK;

/// What a record supersedes: `0001` (whole), `0001 (in part: 2)` (the number of metrics and
/// keys it takes over), comma-separated.
fn supersedes_text(adr: &Adr) -> String {
    let texts: Vec<String> = adr
        .links
        .iter()
        .filter_map(|l| match l.kind {
            LinkKind::Supersedes => Some(format!("{:04}", l.number)),
            LinkKind::SupersedesInPart => {
                Some(format!("{:04} (in part: {})", l.number, l.parts.len()))
            }
            LinkKind::SupersededBy => None,
        })
        .collect();
    if texts.is_empty() { BLANK.to_string() } else { texts.join(", ") }
}

/// The environments a record's thresholds hold for, each once in table order: a key's text
/// form, `any` for thresholds without one.
fn environments(adr: &Adr) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in &adr.thresholds {
        let text = crate::thresholds::file::environment_text(t.environment.as_ref());
        if !out.contains(&text) {
            out.push(text);
        }
    }
    out
}

/// The `adr list` table.
pub fn list_table(adrs: &[Adr]) -> String {
    let mut table = ConsoleTable::markdown([
        "ADR",
        "Title",
        "Status",
        "Date",
        "Thresholds",
        "Environment",
        "Live",
        "Supersedes",
        "File",
    ]);
    for adr in adrs {
        table.row([
            adr.number.map_or("?".into(), |n| format!("{n:04}")),
            adr.title().unwrap_or("(no title)").to_string(),
            adr.status_value().map_or("(invalid)".into(), |s| s.to_string()),
            adr.date.as_ref().map_or(BLANK.into(), |d| d.value.format("%Y-%m-%d").to_string()),
            adr.thresholds.len().to_string(),
            match environments(adr) {
                e if e.is_empty() => BLANK.to_string(),
                e => e.join(", "),
            },
            if is_live(adr, adrs) { "yes" } else { "no" }.to_string(),
            supersedes_text(adr),
            adr.path.display().to_string(),
        ]);
    }
    table.to_string()
}

/// `adr list --json`: one object per record, in file order. `status` is the status as written
/// (`null` when invalid); `superseded_by` the number of a `Superseded by` status; `supersedes`
/// the records its Links supersede whole, `supersedes_in_part` those it supersedes in part with
/// what it takes over; `superseded_in_part` what other records took over from it.
pub fn list_json(adrs: &[Adr]) -> serde_json::Value {
    let items: Vec<serde_json::Value> = adrs
        .iter()
        .map(|adr| {
            let superseded_by = match adr.status_value() {
                Some(AdrStatus::SupersededBy(n)) => Some(n),
                _ => None,
            };
            let whole: Vec<u32> = adr
                .links
                .iter()
                .filter(|l| l.kind == LinkKind::Supersedes)
                .map(|l| l.number)
                .collect();
            let in_part: Vec<serde_json::Value> = adr
                .links
                .iter()
                .filter(|l| l.kind == LinkKind::SupersedesInPart)
                .map(|l| {
                    let parts: Vec<String> =
                        l.parts.iter().map(|p| p.to_string().replace('`', "")).collect();
                    json!({ "adr": l.number, "parts": parts })
                })
                .collect();
            let taken: Vec<serde_json::Value> = superseded_parts(adr, adrs)
                .into_iter()
                .map(|(by, p)| json!({ "by": by, "part": p.to_string().replace('`', "") }))
                .collect();
            json!({
                "adr": adr.number,
                "title": adr.title(),
                "status": adr.status_value().map(|s| s.to_string()),
                "date": adr.date.as_ref().map(|d| d.value.format("%Y-%m-%d").to_string()),
                "profile": adr.profile.as_ref().map(|p| p.value.clone()),
                "thresholds": adr.thresholds.len(),
                "environments": environments(adr),
                "decisions": adr.decisions.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
                "live": is_live(adr, adrs),
                "superseded_by": superseded_by,
                "supersedes": whole,
                "supersedes_in_part": in_part,
                "superseded_in_part": taken,
                "file": adr.path.to_string_lossy().replace('\\', "/"),
            })
        })
        .collect();
    serde_json::Value::Array(items)
}

/// A governed value that no live record names with that value.
#[derive(Clone, Debug, PartialEq)]
pub struct Unnamed {
    pub file: String,
    pub key: String,
    pub value: toml::Value,
    /// Live records that name the key with another value (`ADR-0001 says = 256`).
    pub others: Vec<String>,
}

/// The values of the governed files (`(path, flattened keys)`) that no live record's decision
/// lines name with that value: what `ADR-Exempt` commits or edits without a record left behind.
pub fn unnamed_values(
    governed: &[(String, BTreeMap<String, toml::Value>)],
    adrs: &[Adr],
) -> Vec<Unnamed> {
    let live: Vec<&Adr> = adrs.iter().filter(|a| is_live(a, adrs)).collect();
    let mut out = Vec::new();
    for (file, keys) in governed {
        for (key, value) in keys {
            let mut named = false;
            let mut others = Vec::new();
            for adr in &live {
                let taken = superseded_parts(adr, adrs).into_iter().any(|(_, p)| {
                    matches!(p, super::model::Part::Key { file: f, key: k } if f == file && k.as_str() == key)
                });
                for d in adr.decisions.iter().filter(|d| &d.file == file && d.key.as_str() == key) {
                    match &d.value {
                        Decided::Set(v) if !taken && same_value(v, value) => named = true,
                        v if !taken => others.push(format!("{} says {v}", adr.label())),
                        _ => {}
                    }
                }
            }
            if !named {
                out.push(Unnamed {
                    file: file.clone(),
                    key: key.clone(),
                    value: value.clone(),
                    others,
                });
            }
        }
    }
    out
}

/// The `adr list --exempt` table.
pub fn unnamed_table(unnamed: &[Unnamed]) -> String {
    let mut table = ConsoleTable::markdown(["Governed key", "Value", "Live records"]);
    for u in unnamed {
        table.row([
            format!("{}: {}", u.file, u.key),
            inline(&u.value),
            if u.others.is_empty() { "none name it".to_string() } else { u.others.join(", ") },
        ]);
    }
    table.to_string()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::adr::check::semdiff::flatten;
    use crate::adr::parse::parse_adr;

    fn record(n: u32, status: &str, decisions: &str, links: &str) -> Adr {
        let text = format!(
            "# ADR-{n:04}: T\n\n- Status: {status}\n\n## Decision\n\n{decisions}\n\n## Links\n\n{links}\n"
        );
        parse_adr(Path::new(&format!("docs/adr/{n:04}-t.md")), &text)
    }

    #[test]
    fn values_no_live_record_names_are_listed_with_what_the_records_say() {
        let engine: toml::Table =
            toml::from_str("[scheduler]\nmax_num_seqs = 128\nblock_size = 16\nchunked = true\n")
                .unwrap();
        let governed = vec![("configs/engine.toml".to_string(), flatten(&engine))];
        let adrs = vec![
            record(
                1,
                "Accepted",
                "- configs/engine.toml: scheduler.max_num_seqs = 256\n- configs/engine.toml: scheduler.block_size = 16",
                "None.",
            ),
            record(2, "Proposed", "- configs/engine.toml: scheduler.chunked = true", "None."),
        ];
        let got: Vec<(String, Vec<String>)> =
            unnamed_values(&governed, &adrs).into_iter().map(|u| (u.key, u.others)).collect();
        assert_eq!(
            got,
            [
                ("scheduler.chunked".to_string(), vec![]),
                ("scheduler.max_num_seqs".to_string(), vec!["ADR-0001 says = 256".to_string()]),
            ]
        );
        let table = unnamed_table(&unnamed_values(&governed, &adrs));
        assert!(
            table.contains(
                "| configs/engine.toml: scheduler.max_num_seqs | 128   | ADR-0001 says = 256 |"
            ),
            "{table}"
        );
    }

    #[test]
    fn the_list_shows_what_each_record_supersedes() {
        let adrs = vec![
            record(1, "Accepted", "- configs/engine.toml: a.b = 1", "None."),
            record(
                2,
                "Accepted",
                "- configs/engine.toml: a.b = 2",
                "- Supersedes in part 0001: configs/engine.toml: a.b",
            ),
        ];
        let table = list_table(&adrs);
        assert!(table.contains("| 0001 (in part: 1) |"), "{table}");
        let json = list_json(&adrs);
        assert_eq!(json[1]["supersedes_in_part"][0]["parts"][0], "configs/engine.toml: a.b");
        assert_eq!(json[0]["superseded_in_part"][0]["by"], 2);
        assert_eq!(json[0]["live"], true);
        assert_eq!(json[1]["supersedes"], json!([]));
    }
}
