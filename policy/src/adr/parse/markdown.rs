//! A record's markdown structure, the first phase of reading it: pulldown-cmark's headings,
//! tables (header and rows with their lines), code blocks and HTML comments (`Scan`); the
//! title and the sections they open (`titles_and_sections`); YAML front matter and the
//! `Status:`, `Date:` and `Deciders:` fields; and the lines of a section that hold text
//! (`Doc`). Nothing here knows what a value means.

use std::path::Path;

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use crate::adr::model::{Located, Section, SectionKind};

pub(super) struct Heading {
    pub(super) level: u8,
    pub(super) line: usize,
    pub(super) text: String,
}

pub(super) struct Table {
    pub(super) line: usize,
    pub(super) header: Vec<String>,
    pub(super) rows: Vec<(usize, Vec<String>)>,
}

/// What pulldown-cmark tells about the structure. Line-indexed vectors have `lines + 2`
/// entries so 1-based lines index them directly.
pub(super) struct Scan {
    pub(super) headings: Vec<Heading>,
    pub(super) tables: Vec<Table>,
    /// Lines inside fenced/indented code or an HTML comment: not read for fields or values.
    pub(super) skip: Vec<bool>,
    /// Lines inside an HTML comment (not content).
    pub(super) comment: Vec<bool>,
    /// Lines of tables.
    pub(super) table: Vec<bool>,
}

pub(super) fn scan_markdown(md: &str) -> Scan {
    let line_starts: Vec<usize> =
        std::iter::once(0).chain(md.match_indices('\n').map(|(i, _)| i + 1)).collect();
    let n = line_starts.len() + 2;
    let line_of = |offset: usize| line_starts.partition_point(|&s| s <= offset);
    let last_line =
        |range: &std::ops::Range<usize>| line_of(range.end.saturating_sub(1).max(range.start));
    let mut scan = Scan {
        headings: Vec::new(),
        tables: Vec::new(),
        skip: vec![false; n],
        comment: vec![false; n],
        table: vec![false; n],
    };
    let mut heading: Option<Heading> = None;
    let mut table: Option<Table> = None;
    let mut row: Option<(usize, Vec<String>)> = None;
    let mut cell: Option<String> = None;
    let mut in_head = false;
    let mark = |v: &mut Vec<bool>, from: usize, to: usize| {
        for l in from..=to.min(v.len() - 1) {
            v[l] = true;
        }
    };
    for (event, range) in Parser::new_ext(md, Options::ENABLE_TABLES).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                let level = match level {
                    HeadingLevel::H1 => 1,
                    HeadingLevel::H2 => 2,
                    _ => 3,
                };
                heading = Some(Heading { level, line: line_of(range.start), text: String::new() });
            }
            Event::End(TagEnd::Heading(_)) => scan.headings.extend(heading.take()),
            Event::Start(Tag::CodeBlock(_)) => {
                // The whole block, fences included.
                mark(&mut scan.skip, line_of(range.start), last_line(&range));
            }
            Event::Html(ref html) if html.trim_start().starts_with("<!--") => {
                let first = line_of(range.start);
                let last = last_line(&range);
                mark(&mut scan.skip, first, last);
                mark(&mut scan.comment, first, last);
            }
            Event::Start(Tag::Table(_)) => {
                let first = line_of(range.start);
                mark(&mut scan.table, first, last_line(&range));
                table = Some(Table { line: first, header: Vec::new(), rows: Vec::new() });
            }
            Event::End(TagEnd::Table) => scan.tables.extend(table.take()),
            Event::Start(Tag::TableHead) => in_head = true,
            Event::End(TagEnd::TableHead) => in_head = false,
            Event::Start(Tag::TableRow) => row = Some((line_of(range.start), Vec::new())),
            Event::End(TagEnd::TableRow) => {
                if let (Some(t), Some(r)) = (table.as_mut(), row.take()) {
                    t.rows.push(r);
                }
            }
            Event::Start(Tag::TableCell) => cell = Some(String::new()),
            Event::End(TagEnd::TableCell) => {
                let c = cell.take().unwrap_or_default();
                if in_head {
                    if let Some(t) = table.as_mut() {
                        t.header.push(c);
                    }
                } else if let Some(r) = row.as_mut() {
                    r.1.push(c);
                }
            }
            Event::Text(t) | Event::Code(t) | Event::InlineHtml(t) | Event::Html(t) => {
                if let Some(c) = cell.as_mut() {
                    c.push_str(&t);
                } else if let Some(h) = heading.as_mut() {
                    h.text.push_str(&t);
                }
            }
            _ => {}
        }
    }
    scan
}

/// Whether an H3 heading opens a section of its own: MADR 4 writes `### Consequences` and
/// `### Confirmation` (the thresholds' home) under `## Decision Outcome`.
fn h3_section(text: &str) -> bool {
    matches!(
        SectionKind::from_heading(text),
        Some(SectionKind::Consequences | SectionKind::Thresholds)
    )
}

/// H1 headings are titles; H2 headings open sections, which end at the next H2 (or at an H3
/// that opens a section, see [`h3_section`], which ends at the next H2 or H3).
pub(super) fn titles_and_sections(
    scan: &Scan,
    lines: &[&str],
) -> (Vec<Located<String>>, Vec<Section>) {
    let mut titles = Vec::new();
    let mut sections: Vec<Section> = Vec::new();
    for (i, h) in scan.headings.iter().enumerate() {
        match h.level {
            1 => titles.push(Located { value: h.text.trim().to_string(), line: h.line }),
            2 | 3 if h.level == 2 || h3_section(&h.text) => {
                let ends = |n: &&Heading| {
                    n.level == 2 || (n.level == 3 && (h.level == 3 || h3_section(&n.text)))
                };
                let end =
                    scan.headings[i + 1..].iter().find(ends).map_or(lines.len() + 1, |n| n.line);
                let has_content = (h.line + 1..end).any(|l| {
                    let s = line_at(lines, l).trim();
                    !s.is_empty() && !scan.comment[l]
                });
                sections.push(Section {
                    kind: SectionKind::from_heading(&h.text),
                    heading: h.text.trim().to_string(),
                    line: h.line,
                    end,
                    has_content,
                });
            }
            _ => {}
        }
    }
    (titles, sections)
}

/// A record's lines with what the markdown scan found in them.
pub(super) struct Doc<'a> {
    pub(super) lines: &'a [&'a str],
    pub(super) scan: &'a Scan,
    pub(super) sections: &'a [Section],
}

impl Doc<'_> {
    /// The text of a 1-based line (empty past the end).
    pub(super) fn line(&self, line: usize) -> &str {
        line_at(self.lines, line)
    }

    /// The body lines of every section of `kind` that hold text (not code, comments or tables).
    pub(super) fn body_lines(&self, kind: SectionKind) -> Vec<usize> {
        self.sections
            .iter()
            .filter(|s| s.kind == Some(kind))
            .flat_map(|s| s.line + 1..s.end)
            .filter(|&l| !self.scan.skip[l] && !self.scan.table[l])
            .collect()
    }

    /// Whether `line` is in the body of a section of `kind`.
    pub(super) fn in_section(&self, line: usize, kind: SectionKind) -> bool {
        self.sections.iter().any(|s| s.kind == Some(kind) && s.line < line && line < s.end)
    }
}

/// A `status`, `date` or `deciders` field as written, with its line.
pub(super) struct Field {
    pub(super) key: String,
    pub(super) value: String,
    pub(super) line: usize,
}

/// YAML front matter: the lines it takes and the fields it holds.
pub(super) struct FrontMatter {
    /// Lines the front matter occupies (0 when there is none).
    pub(super) end: usize,
    pub(super) fields: Vec<Field>,
}

/// The front matter (`---` ... `---` on the first lines), if any; an unclosed one is reported.
pub(super) fn front_matter(lines: &[&str], p: &mut impl FnMut(usize, String)) -> FrontMatter {
    let none = FrontMatter { end: 0, fields: Vec::new() };
    if lines.first().map(|l| l.trim_end()) != Some("---") {
        return none;
    }
    let Some(close) = lines.iter().skip(1).position(|l| matches!(l.trim_end(), "---" | "..."))
    else {
        p(1, "front matter opened here is never closed with `---`".into());
        return none;
    };
    let close = close + 1; // index of the closing line
    let mut fields = Vec::new();
    for (i, raw) in lines[1..close].iter().enumerate() {
        let Some((k, v)) = raw.split_once(':') else { continue };
        let key = k.trim().to_ascii_lowercase();
        // MADR 4 names the deciders `decision-makers` (and has `consulted`, `informed`).
        let key = if key == "decision-makers" { "deciders".to_string() } else { key };
        if matches!(key.as_str(), "status" | "date" | "deciders") {
            let v = v.trim().trim_matches(|c| c == '"' || c == '\'').to_string();
            fields.push(Field { key, value: v, line: i + 2 });
        }
    }
    FrontMatter { end: close + 1, fields }
}

/// `- **Status:** Accepted` -> ("status", "Accepted").
pub(super) fn field(raw: &str, line: usize) -> Option<Field> {
    let t = strip_list_marker(raw.trim()).trim_start_matches(['*', '_']);
    let (k, v) = t.split_once(':')?;
    let key = k.trim().trim_end_matches(['*', '_']).trim().to_ascii_lowercase();
    if !matches!(key.as_str(), "status" | "date" | "deciders") {
        return None;
    }
    let value = v
        .trim_start_matches(|c: char| c == '*' || c == '_' || c.is_whitespace())
        .trim_end()
        .to_string();
    Some(Field { key, value, line })
}

/// Strip a list marker (`-`, `*`, `+`, `1.`, `1)`) from a trimmed line.
pub fn strip_list_marker(t: &str) -> &str {
    for m in ["- ", "* ", "+ "] {
        if let Some(rest) = t.strip_prefix(m) {
            return rest.trim_start();
        }
    }
    let digits = t.chars().take_while(|c| c.is_ascii_digit()).count();
    if digits > 0 && digits < 10 {
        let rest = &t[digits..];
        if let Some(r) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return r.trim_start();
        }
    }
    t
}

pub(super) fn line_at<'a>(lines: &[&'a str], line: usize) -> &'a str {
    lines.get(line.wrapping_sub(1)).copied().unwrap_or("")
}

/// The record number in a file name `NNNN-slug.md`.
pub fn number_from_file_name(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let digits: String = name.chars().take_while(|c| c.is_ascii_digit()).collect();
    if digits.len() == 4 && name[4..].starts_with('-') { digits.parse().ok() } else { None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_tolerate_bold_and_lists() {
        let f = field("- **Status:** Accepted", 3).unwrap();
        assert_eq!((f.key.as_str(), f.value.as_str()), ("status", "Accepted"));
        let f = field("**Date**: 2025-01-02", 4).unwrap();
        assert_eq!((f.key.as_str(), f.value.as_str()), ("date", "2025-01-02"));
        assert!(field("- Scope: all", 5).is_none());
    }
}
