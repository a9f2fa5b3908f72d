//! A record draft's view, which `adr/record.md` renders: the title block, then each section
//! with its heading (the canonical one of [`SectionKind`], so a draft's headings are those
//! `adr lint` requires) and its body, a sequence of markdown text and tables.
//!
//! `adr new` (`new.rs`) fills the sections; a table is a [`Table`] of rows, rendered with its
//! header and alignment row by the template, never a string of pipes.

use std::fmt::{self, Write as _};

use serde::Serialize;

use super::model::SectionKind;

/// The whole draft.
#[derive(Debug, Serialize)]
pub struct Draft {
    /// `ADR-0007`'s number, zero-padded as files and titles spell it.
    pub number: String,
    pub title: String,
    pub status: &'static str,
    /// `YYYY-MM-DD`.
    pub date: String,
    pub deciders: String,
    pub sections: Vec<Section>,
}

impl Draft {
    /// The draft in markdown.
    pub fn render(&self) -> anyhow::Result<String> {
        crate::template::render(crate::template::RECORD, self)
    }
}

/// One H2 section.
#[derive(Debug, Serialize)]
pub struct Section {
    pub heading: &'static str,
    pub blocks: Vec<Block>,
}

impl Section {
    pub fn new(kind: SectionKind, body: Body) -> Section {
        Section { heading: kind.heading(), blocks: body.finish() }
    }
}

#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Block {
    /// Markdown as it is, with its own line breaks.
    Text {
        text: String,
    },
    Table(Table),
}

/// A markdown table: a header, each column's alignment, rows of cells (already markdown; a `|`
/// in a cell escaped by whoever wrote it).
#[derive(Debug, Serialize)]
pub struct Table {
    pub head: Vec<String>,
    /// `---` (left) or `---:` (right), one per column.
    pub align: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

/// Column alignments in a [`Table`].
pub const LEFT: &str = "---";
pub const RIGHT: &str = "---:";

impl Table {
    /// A table of columns `(header, alignment)`, no rows yet.
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = (S, &'static str)>) -> Table {
        let (head, align) = columns.into_iter().map(|(h, a)| (h.into(), a)).unzip();
        Table { head, align, rows: Vec::new() }
    }

    /// A row; it must have a cell per column.
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.head.len(), "a row of {:?}", self.head);
        self.rows.push(cells);
    }
}

/// A section's body as its renderer writes it: text, with tables between.
#[derive(Debug, Default)]
pub struct Body {
    blocks: Vec<Block>,
    text: String,
}

impl Body {
    /// Text and a line break.
    pub fn line(&mut self, args: fmt::Arguments<'_>) {
        self.put(args);
        self.text.push('\n');
    }

    /// Text.
    pub fn put(&mut self, args: fmt::Arguments<'_>) {
        // Formatted in place; writing to a `String` cannot fail.
        let _ = self.text.write_fmt(args);
    }

    pub fn push_str(&mut self, s: &str) {
        self.text.push_str(s);
    }

    pub fn push(&mut self, c: char) {
        self.text.push(c);
    }

    /// A table after the text so far.
    pub fn table(&mut self, table: Table) {
        self.flush();
        self.blocks.push(Block::Table(table));
    }

    fn flush(&mut self) {
        if !self.text.is_empty() {
            self.blocks.push(Block::Text { text: std::mem::take(&mut self.text) });
        }
    }

    /// The body alone, rendered as in a draft (for tests of one section's renderer).
    #[cfg(test)]
    pub fn markdown(self) -> String {
        let draft = Draft {
            number: "0000".into(),
            title: "body".into(),
            status: "Proposed",
            date: "1970-01-01".into(),
            deciders: "<names>".into(),
            sections: vec![Section::new(SectionKind::Context, self)],
        };
        let md = draft.render().unwrap();
        md.split_once("## Context\n\n").unwrap().1.to_string()
    }

    pub fn finish(mut self) -> Vec<Block> {
        self.flush();
        self.blocks
    }
}

/// Whole pieces of text, one after another (a list's lines).
impl Extend<String> for Body {
    fn extend<I: IntoIterator<Item = String>>(&mut self, pieces: I) {
        for p in pieces {
            self.text.push_str(&p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draft_renders_its_sections_and_tables_as_markdown() {
        let mut body = Body::default();
        body.line(format_args!("Before {}.", 1));
        body.push('\n');
        let mut t = Table::new([("Config", LEFT), ("Requests", RIGHT)]);
        t.row(vec!["baseline".into(), "12".into()]);
        t.row(vec!["a | b".replace('|', "\\|"), "3".into()]);
        body.table(t);
        body.push_str("\nAfter.\n\n");
        let mut links = Body::default();
        links.push_str("None.\n");
        let draft = Draft {
            number: "0007".into(),
            title: "Smaller batches".into(),
            status: "Proposed",
            date: "2026-12-04".into(),
            deciders: "<names>".into(),
            sections: vec![
                Section::new(SectionKind::MetricsMatrix, body),
                Section::new(SectionKind::Links, links),
            ],
        };
        let md = draft.render().unwrap();
        assert_eq!(
            md,
            "# ADR-0007: Smaller batches\n\n- Status: Proposed\n- Date: 2026-12-04\n\
             - Deciders: <names>\n\n## Metrics matrix\n\nBefore 1.\n\n| Config | Requests |\n\
             |---|---:|\n| baseline | 12 |\n| a \\| b | 3 |\n\nAfter.\n\n## Links\n\nNone.\n"
        );
    }

    mod roundtrip {
        use proptest::prelude::*;

        use super::*;
        use crate::adr::model::REQUIRED_SECTIONS;
        use crate::adr::{AdrStatus, parse_adr};
        use crate::thresholds::{Action, Comparator};

        /// A threshold row as the draft writes it: metric, comparator, limit, unit, action.
        fn threshold()
        -> impl Strategy<Value = (&'static str, Comparator, f64, &'static str, Action)> {
            let metrics = infergate_model::metric::known_metrics();
            let comparators = [Comparator::Le, Comparator::Lt, Comparator::Ge, Comparator::Gt];
            (
                0..metrics.len(),
                proptest::sample::select(comparators.to_vec()),
                -1e6f64..1e6,
                proptest::bool::ANY,
            )
                .prop_map(move |(i, c, limit, block)| {
                    // Limits as `adr new` writes them: four significant digits.
                    let limit: f64 = format!("{limit:.4e}").parse().unwrap();
                    let action = if block { Action::Block } else { Action::Warn };
                    (metrics[i].path, c, limit, metrics[i].unit, action)
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            /// A draft rendered through the template parses back (`parse_adr`) to the values
            /// it was made of: title, status, date, deciders, the required sections in order,
            /// each threshold row, a `|` in a cell kept inside its cell.
            #[test]
            fn a_rendered_draft_parses_back_to_its_values(
                title in "[A-Za-z][A-Za-z0-9 ,.()-]{0,40}[A-Za-z0-9)]",
                days in 0i64..5000,
                deciders in "[A-Z][a-z]{1,8}( [A-Z][a-z]{1,8})?(, [A-Z][a-z]{1,8})?",
                rows in proptest::collection::vec(threshold(), 0..6),
                cell in "[a-z]{1,5}( \\| [a-z]{1,5})?",
            ) {
                let date = chrono::NaiveDate::from_ymd_opt(2020, 1, 1).unwrap()
                    + chrono::Duration::days(days);
                // One threshold per metric and action, as the parser requires.
                let mut seen = std::collections::BTreeSet::new();
                let rows: Vec<_> = rows.into_iter().filter(|r| seen.insert((r.0, r.4 == Action::Block))).collect();
                let mut sections = Vec::new();
                for (kind, _) in REQUIRED_SECTIONS {
                    let mut body = Body::default();
                    match kind {
                        SectionKind::MetricsMatrix => {
                            let mut t = Table::new([("Config", LEFT), ("Requests", RIGHT)]);
                            t.row(vec![cell.replace('|', "\\|"), "12".into()]);
                            body.table(t);
                            body.push('\n');
                        }
                        SectionKind::Thresholds => {
                            body.push_str("Proposed thresholds:\n\n");
                            let head = ["Metric", "Comparator", "Limit", "Unit", "Action"];
                            let mut t = Table::new(head.map(|h| (h, LEFT)));
                            for (metric, c, limit, unit, action) in &rows {
                                t.row(vec![
                                    format!("`{metric}`"),
                                    c.to_string(),
                                    limit.to_string(),
                                    unit.to_string(),
                                    action.to_string(),
                                ]);
                            }
                            body.table(t);
                            body.push('\n');
                        }
                        _ => body.line(format_args!("Text of {}.\n", kind.heading())),
                    }
                    sections.push(Section::new(kind, body));
                }
                let draft = Draft {
                    number: "0042".into(),
                    title: title.clone(),
                    status: "Proposed",
                    date: date.format("%Y-%m-%d").to_string(),
                    deciders: deciders.clone(),
                    sections,
                };
                let md = draft.render().unwrap();
                let adr = parse_adr("docs/adr/0042-x.md".as_ref(), &md);
                prop_assert!(adr.problems.is_empty(), "{:?}\n{md}", adr.problems);
                prop_assert_eq!(adr.title(), Some(title.as_str()));
                prop_assert_eq!(adr.status.as_ref().map(|s| s.value), Some(AdrStatus::Proposed));
                prop_assert_eq!(adr.date.as_ref().map(|d| d.value), Some(date));
                prop_assert_eq!(adr.deciders.as_ref().map(|d| d.value.as_str()), Some(deciders.as_str()));
                let kinds: Vec<_> = adr.sections.iter().map(|s| s.kind).collect();
                let want: Vec<_> = REQUIRED_SECTIONS.iter().map(|(k, _)| Some(*k)).collect();
                prop_assert_eq!(kinds, want);
                let parsed: Vec<_> = adr
                    .thresholds
                    .iter()
                    .map(|t| (t.metric.to_string(), t.comparator, t.limit, t.unit.clone(), t.action))
                    .collect();
                let made: Vec<_> = rows
                    .iter()
                    .map(|(m, c, l, u, a)| (m.to_string(), *c, *l, u.to_string(), *a))
                    .collect();
                prop_assert_eq!(parsed, made);
            }
        }
    }
}
