//! The console tables every command prints: a plain view ([`ConsoleTable`]: a style, a header,
//! rows of text, the right-aligned columns) that a command fills, and the one place that draws
//! it, through comfy_table.

use std::fmt;

use comfy_table::presets::{ASCII_MARKDOWN, UTF8_FULL_CONDENSED};
use comfy_table::{Cell, CellAlignment, Table};

/// How a table is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Box-drawing frame (`UTF8_FULL_CONDENSED`): the tables of a measurement.
    Framed,
    /// A Markdown table (`ASCII_MARKDOWN`): tables meant to be pasted into documents.
    Markdown,
}

/// A console table as text: the header, the rows, and which columns are right-aligned (the
/// header stays left-aligned). A row may be shorter than the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleTable {
    style: Style,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    right: Vec<usize>,
}

impl ConsoleTable {
    fn new<S: Into<String>>(style: Style, header: impl IntoIterator<Item = S>) -> ConsoleTable {
        ConsoleTable {
            style,
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
            right: Vec::new(),
        }
    }

    /// A framed table with this header.
    pub fn framed<S: Into<String>>(header: impl IntoIterator<Item = S>) -> ConsoleTable {
        ConsoleTable::new(Style::Framed, header)
    }

    /// A Markdown table with this header.
    pub fn markdown<S: Into<String>>(header: impl IntoIterator<Item = S>) -> ConsoleTable {
        ConsoleTable::new(Style::Markdown, header)
    }

    /// The columns (0-based) whose cells are right-aligned.
    pub fn right_aligned(mut self, columns: impl IntoIterator<Item = usize>) -> ConsoleTable {
        self.right.extend(columns);
        self
    }

    /// Appends a row.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    pub fn style(&self) -> Style {
        self.style
    }

    pub fn header(&self) -> &[String] {
        &self.header
    }

    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// The table drawn, without a trailing newline.
    pub fn render(&self) -> String {
        let mut t = Table::new();
        t.load_style(match self.style {
            Style::Framed => UTF8_FULL_CONDENSED,
            Style::Markdown => ASCII_MARKDOWN,
        });
        t.set_header(&self.header);
        for row in &self.rows {
            t.add_row(row.iter().enumerate().map(|(i, text)| {
                let cell = Cell::new(text);
                if self.right.contains(&i) {
                    cell.set_alignment(CellAlignment::Right)
                } else {
                    cell
                }
            }));
        }
        t.to_string()
    }
}

impl fmt::Display for ConsoleTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framed_right_aligned_and_short_rows() {
        let mut t = ConsoleTable::framed(["name", "n", "note"]).right_aligned([1]);
        t.row(["a", "1", "x"]);
        t.row(["bb", "22"]);
        let want = "\
┌──────┬────┬──────┐
│ name ┆ n  ┆ note │
╞══════╪════╪══════╡
│ a    ┆  1 ┆ x    │
│ bb   ┆ 22 ┆      │
└──────┴────┴──────┘";
        assert_eq!(t.to_string(), want);
    }

    #[test]
    fn markdown() {
        let mut t = ConsoleTable::markdown(["k", "v"]);
        t.row(["a", "b"]);
        assert_eq!(t.render(), "| k | v |\n|---|---|\n| a | b |");
    }
}
