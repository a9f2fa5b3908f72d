//! Text edits of a record (status, date, links) that keep everything else as written,
//! line endings included.

use std::path::PathBuf;

use super::model::{Adr, SectionKind};
use super::parse::strip_list_marker;

fn split(text: &str) -> (Vec<String>, bool) {
    let crlf = text.contains("\r\n");
    (text.replace("\r\n", "\n").split('\n').map(str::to_string).collect(), crlf)
}

fn join(lines: &[String], crlf: bool) -> String {
    let s = lines.join("\n");
    if crlf { s.replace('\n', "\r\n") } else { s }
}

/// Replace the value of a `Key: value` line (list markers, bold and front matter kept), or the
/// whole content of a bare line (`## Status` section).
pub fn replace_value(line: &str, value: &str) -> String {
    if let Some(colon) = line.find(':') {
        let mut end = colon + 1;
        let bytes = line.as_bytes();
        while end < bytes.len() && (bytes[end] == b'*' || bytes[end] == b'_') {
            end += 1;
        }
        return format!("{} {value}", &line[..end]);
    }
    let trimmed = line.trim_start();
    let indent = &line[..line.len() - trimmed.len()];
    let content = strip_list_marker(trimmed);
    let marker = &trimmed[..trimmed.len() - content.len()];
    format!("{indent}{marker}{value}")
}

/// A field an edit needs is missing from the record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{} has no {field} line", .path.display())]
pub struct MissingField {
    pub path: PathBuf,
    /// `status` or `date`.
    pub field: &'static str,
}

/// Set the status and the date lines of a parsed record. Both must exist (lint requires them).
pub fn set_status_and_date(
    text: &str,
    adr: &Adr,
    status: &str,
    date: &str,
) -> Result<String, MissingField> {
    let (mut lines, crlf) = split(text);
    let missing = |field| MissingField { path: adr.path.clone(), field };
    let s = adr.status.as_ref().ok_or_else(|| missing("status"))?;
    let d = adr.date.as_ref().ok_or_else(|| missing("date"))?;
    for (line, value) in [(s.line, status), (d.line, date)] {
        let l = &mut lines[line - 1];
        *l = replace_value(l, value);
    }
    Ok(join(&lines, crlf))
}

/// Add a line to the Links section: it replaces a lone `None.`, otherwise follows the last
/// line of the section. Without a Links section, one is appended.
pub fn add_link(text: &str, adr: &Adr, link: &str) -> String {
    let (mut lines, crlf) = split(text);
    match adr.section(SectionKind::Links) {
        Some(section) => {
            let body: Vec<usize> = (section.line + 1..section.end.min(lines.len() + 1))
                .filter(|&l| !lines[l - 1].trim().is_empty())
                .collect();
            let is_none = |l: &usize| {
                matches!(lines[*l - 1].trim().to_ascii_lowercase().as_str(), "none" | "none.")
            };
            match body.as_slice() {
                [only] if is_none(only) => lines[only - 1] = format!("- {link}"),
                [.., last] => lines.insert(*last, format!("- {link}")),
                [] => lines.insert(section.line, format!("\n- {link}")),
            }
        }
        None => {
            while lines.last().is_some_and(|l| l.trim().is_empty()) {
                lines.pop();
            }
            lines.push(String::new());
            lines.push("## Links".into());
            lines.push(String::new());
            lines.push(format!("- {link}"));
            lines.push(String::new());
        }
    }
    join(&lines, crlf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adr::parse::parse_adr;
    use std::path::Path;

    #[test]
    fn values_are_replaced_in_every_supported_form() {
        assert_eq!(replace_value("- Status: Proposed", "Accepted"), "- Status: Accepted");
        assert_eq!(replace_value("**Status:** Proposed", "Accepted"), "**Status:** Accepted");
        assert_eq!(replace_value("status: \"Proposed\"", "Accepted"), "status: Accepted");
        assert_eq!(replace_value("  - Proposed", "Accepted"), "  - Accepted");
    }

    #[test]
    fn status_and_links_edits_keep_crlf_and_the_rest() {
        let text = "---\r\nstatus: Proposed\r\ndate: 2024-01-01\r\n---\r\n# ADR-0002: T\r\n\r\n## Links\r\n\r\nNone.\r\n";
        let adr = parse_adr(Path::new("docs/adr/0002-t.md"), text);
        let out = set_status_and_date(text, &adr, "Accepted", "2025-03-04").unwrap();
        assert_eq!(out, text.replace("Proposed", "Accepted").replace("2024-01-01", "2025-03-04"));
        let out = add_link(&out, &adr, "Supersedes [ADR-0001](0001-x.md)");
        assert!(out.ends_with("## Links\r\n\r\n- Supersedes [ADR-0001](0001-x.md)\r\n"), "{out:?}");
        let adr = parse_adr(Path::new("docs/adr/0002-t.md"), &out);
        assert_eq!(adr.links.len(), 1);
        let twice = add_link(&out, &adr, "Superseded by 0003");
        assert!(twice.contains("(0001-x.md)\r\n- Superseded by 0003\r\n"), "{twice:?}");
    }

    #[test]
    fn a_record_without_a_date_line_is_not_edited() {
        let text = "# ADR-0002: T\n\n- Status: Proposed\n";
        let adr = parse_adr(Path::new("docs/adr/0002-t.md"), text);
        let e = set_status_and_date(text, &adr, "Accepted", "2025-03-04").unwrap_err();
        assert_eq!(e.field, "date");
        assert_eq!(e.to_string(), "docs/adr/0002-t.md has no date line");
    }

    #[test]
    fn a_missing_links_section_is_appended() {
        let text = "# ADR-0002: T\n\n- Status: Accepted\n";
        let adr = parse_adr(Path::new("docs/adr/0002-t.md"), text);
        assert_eq!(
            add_link(text, &adr, "Supersedes 0001"),
            "# ADR-0002: T\n\n- Status: Accepted\n\n## Links\n\n- Supersedes 0001\n"
        );
    }
}
