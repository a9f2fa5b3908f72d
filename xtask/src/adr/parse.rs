//! Markdown -> [`Adr`]: pulldown-cmark (with tables) finds headings, tables, code and HTML
//! blocks; fields, decision lines and links are read from the source lines of their section, so
//! every value keeps its exact line.
//!
//! Tolerated: CRLF line endings; YAML-style front matter (`---` ... `---`) holding `status`,
//! `date` and `deciders`; a `## Status` section instead of the status block; numbered headings
//! (`## 1. Context`); bold field names (`**Status:** Accepted`); decision lines in backticks.

use std::fmt;
use std::path::Path;

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use super::model::{
    Adr, AdrStatus, BudgetRow, Decided, DecisionLine, Link, LinkKind, Located, NO_STATUS, Part,
    Problem, Section, SectionKind, ThresholdRow,
};
use crate::thresholds::rollback::{RollbackCondition, parse_condition};
use crate::thresholds::rule::UnknownAction;
use crate::thresholds::units::to_metric_unit;
use crate::thresholds::{Action, Comparator};

/// Parse a record. Never fails: anything unreadable becomes a [`Problem`] in `Adr::problems`
/// (located at its line), and the values that could be read are kept.
pub fn parse_adr(path: &Path, text: &str) -> Adr {
    let text = text.replace("\r\n", "\n");
    let lines: Vec<&str> = text.split('\n').collect();
    let mut problems = Problems { path, list: Vec::new() };
    let front = front_matter(&lines, &mut |line, msg| problems.add(line, msg));
    let md: String = if front.end > 0 {
        let mut out: Vec<&str> = vec![""; front.end];
        out.extend_from_slice(&lines[front.end..]);
        out.join("\n")
    } else {
        text.clone()
    };
    let scan = scan_markdown(&md);
    let (titles, sections) = titles_and_sections(&scan, &lines);
    let doc = Doc { lines: &lines, scan: &scan, sections: &sections };
    let block = status_block(&doc, &titles, front, &mut problems);
    let decisions = decision_lines(&doc, &mut problems);
    let links = links(&doc, &mut problems);
    let thresholds = threshold_rows(&doc, &mut problems);
    let budgets = budget_rows(&doc, &mut problems);
    let rollback = rollback_conditions(&doc, &mut problems);
    let profile = thresholds_profile(&doc, &mut problems);
    let scenario = thresholds_scenario(&doc, &mut problems);
    let placeholders = placeholders(&doc);
    let assets = assets(&doc);
    let mut slo_missed = None;
    let mut slo_exception = None;
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim();
        if slo_missed.is_none() && t.starts_with(super::model::SLO_MISSED) {
            slo_missed = Some(i + 1);
        }
        if let Some(why) =
            t.strip_prefix(super::model::SLO_EXCEPTION).filter(|_| slo_exception.is_none())
        {
            slo_exception = Some(Located { value: why.trim().to_string(), line: i + 1 });
        }
    }
    Adr {
        path: path.to_path_buf(),
        number: number_from_file_name(path),
        titles,
        status: block.status,
        status_line: block.status_line,
        date: block.date,
        deciders: block.deciders,
        sections,
        decisions,
        thresholds,
        budgets,
        rollback,
        profile,
        scenario,
        links,
        placeholders,
        assets,
        slo_missed,
        slo_exception,
        problems: problems.list,
    }
}

/// The problems met while parsing one record.
struct Problems<'a> {
    path: &'a Path,
    list: Vec<Problem>,
}

impl Problems<'_> {
    fn add(&mut self, line: usize, message: impl fmt::Display) {
        self.list.push(Problem::new(self.path, line, message.to_string()));
    }
}

/// A record's lines with what the markdown scan found in them.
struct Doc<'a> {
    lines: &'a [&'a str],
    scan: &'a Scan,
    sections: &'a [Section],
}

impl Doc<'_> {
    /// The text of a 1-based line (empty past the end).
    fn line(&self, line: usize) -> &str {
        line_at(self.lines, line)
    }

    /// The body lines of every section of `kind` that hold text (not code, comments or tables).
    fn body_lines(&self, kind: SectionKind) -> Vec<usize> {
        self.sections
            .iter()
            .filter(|s| s.kind == Some(kind))
            .flat_map(|s| s.line + 1..s.end)
            .filter(|&l| !self.scan.skip[l] && !self.scan.table[l])
            .collect()
    }

    /// Whether `line` is in the body of a section of `kind`.
    fn in_section(&self, line: usize, kind: SectionKind) -> bool {
        self.sections.iter().any(|s| s.kind == Some(kind) && s.line < line && line < s.end)
    }
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
fn titles_and_sections(scan: &Scan, lines: &[&str]) -> (Vec<Located<String>>, Vec<Section>) {
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

/// The status, date and deciders of a record, with the line the status was written at.
struct StatusBlock {
    status: Option<Located<AdrStatus>>,
    status_line: Option<usize>,
    date: Option<Located<chrono::NaiveDate>>,
    deciders: Option<Located<String>>,
}

/// The status block: between the H1 and the first H2, plus front matter and a `## Status`
/// section. Each field is read once; a missing or invalid one is a problem.
fn status_block(
    doc: &Doc<'_>,
    titles: &[Located<String>],
    front: FrontMatter,
    problems: &mut Problems<'_>,
) -> StatusBlock {
    let preamble_start = titles.first().map_or(front.end + 1, |t| t.line + 1);
    let preamble_end = doc.sections.first().map_or(doc.lines.len() + 1, |s| s.line);
    let mut fields = front.fields;
    for l in preamble_start..preamble_end {
        if doc.scan.skip[l] {
            continue;
        }
        if let Some(f) = field(doc.line(l), l) {
            fields.push(f);
        }
    }
    for l in doc.body_lines(SectionKind::Status) {
        let raw = doc.line(l);
        match field(raw, l) {
            Some(f) => fields.push(f),
            None if !raw.trim().is_empty() => fields.push(Field {
                key: "status".into(),
                value: strip_list_marker(raw.trim()).to_string(),
                line: l,
            }),
            None => {}
        }
    }
    let mut block = StatusBlock { status: None, status_line: None, date: None, deciders: None };
    let mut seen: Vec<(String, usize)> = Vec::new();
    for f in fields {
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == f.key) {
            problems.add(f.line, format!("`{}` is given twice (first at line {first})", f.key));
            continue;
        }
        seen.push((f.key.clone(), f.line));
        match f.key.as_str() {
            "status" => match AdrStatus::parse(&f.value) {
                Ok(s) => block.status = Some(Located { value: s, line: f.line }),
                Err(e) => problems.add(f.line, e),
            },
            "date" => match parse_iso_date(&f.value) {
                Ok(d) => block.date = Some(Located { value: d, line: f.line }),
                Err(e) => problems.add(f.line, e),
            },
            _ => block.deciders = Some(Located { value: f.value, line: f.line }),
        }
    }
    let title_line = titles.first().map_or(1, |t| t.line);
    let written = |key: &str| seen.iter().find(|(k, _)| k == key).map(|(_, l)| *l);
    block.status_line = written("status");
    if block.status_line.is_none() {
        problems.add(title_line, NO_STATUS);
    }
    if written("date").is_none() {
        problems.add(title_line, "no date; write `- Date: YYYY-MM-DD` under the title");
    }
    match &block.deciders {
        None => problems.add(
            title_line,
            "no deciders; write `- Deciders: <names>` under the title (in front matter: \
                 `decision-makers: <names>`)",
        ),
        Some(d) if d.value.trim().is_empty() => {
            problems.add(d.line, "deciders are empty; name who decided")
        }
        _ => {}
    }
    block
}

/// The decision lines of the Decision section (lines that start with `configs/`).
fn decision_lines(doc: &Doc<'_>, problems: &mut Problems<'_>) -> Vec<DecisionLine> {
    let mut decisions = Vec::new();
    for l in doc.body_lines(SectionKind::Decision) {
        let Some(candidate) = decision_candidate(doc.line(l)) else { continue };
        match parse_decision_line(candidate) {
            Ok((file, key, value)) => decisions.push(DecisionLine { file, key, value, line: l }),
            Err(e) => problems.add(l, e),
        }
    }
    decisions
}

/// The supersession links of the Links section.
fn links(doc: &Doc<'_>, problems: &mut Problems<'_>) -> Vec<Link> {
    let mut links = Vec::new();
    for l in doc.body_lines(SectionKind::Links) {
        match parse_link(doc.line(l), l) {
            Some(Ok(link)) => links.push(link),
            Some(Err(e)) => problems.add(l, e),
            None => {}
        }
    }
    links
}

/// The columns of a thresholds table, in the order [`parse_threshold_row`] takes its cells.
const THRESHOLD_COLUMNS: [&str; 5] = ["metric", "comparator", "limit", "unit", "action"];

/// The rows of the thresholds tables (in the thresholds section, or in the Decision section when
/// they have the thresholds columns). A metric has one threshold per action.
fn threshold_rows(doc: &Doc<'_>, problems: &mut Problems<'_>) -> Vec<ThresholdRow> {
    let mut thresholds: Vec<ThresholdRow> = Vec::new();
    for table in &doc.scan.tables {
        let in_thresholds = doc.in_section(table.line, SectionKind::Thresholds);
        let in_decision = doc.in_section(table.line, SectionKind::Decision);
        if !in_thresholds && !in_decision {
            continue;
        }
        let header: Vec<String> =
            table.header.iter().map(|h| h.trim().to_ascii_lowercase()).collect();
        if header.iter().any(|h| h == "budget") {
            // A regression budgets table ([`budget_rows`]).
            continue;
        }
        let col = |name: &str| header.iter().position(|h| h == name);
        let missing: Vec<&str> =
            THRESHOLD_COLUMNS.iter().copied().filter(|c| col(c).is_none()).collect();
        if !missing.is_empty() {
            if in_thresholds {
                problems.add(
                    table.line,
                    format!(
                        "thresholds table lacks column(s) {}; its columns must be: metric, \
                         comparator, limit, unit, action",
                        missing.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
                    ),
                );
            }
            continue;
        }
        let idx: Vec<usize> = THRESHOLD_COLUMNS.iter().map(|c| col(c).unwrap_or(0)).collect();
        let env_col = col(ENVIRONMENT_COLUMN);
        for (line, cells) in &table.rows {
            let cell = |i: usize| cells.get(idx[i]).map(|s| s.trim()).unwrap_or("");
            let env_cell = env_col.and_then(|i| cells.get(i)).map_or("", |s| s.trim());
            let environment = match parse_environment_cell(env_cell) {
                Ok(env) => env,
                Err(e) => {
                    problems.add(*line, e);
                    continue;
                }
            };
            match parse_threshold_row([cell(0), cell(1), cell(2), cell(3), cell(4)]) {
                Ok(row) => {
                    let row = ThresholdRow { line: *line, environment, ..row };
                    if let Some(prev) = thresholds.iter().find(|t| {
                        t.metric == row.metric
                            && t.action == row.action
                            && t.environment == row.environment
                    }) {
                        let env = row
                            .environment
                            .as_ref()
                            .map_or(String::new(), |e| format!(" for environment `{e}`"));
                        problems.add(
                            *line,
                            format!(
                                "metric `{}` already has a `{}` threshold{env} at line {}",
                                row.metric, row.action, prev.line
                            ),
                        );
                        continue;
                    }
                    thresholds.push(row);
                }
                Err(errors) => {
                    for e in errors {
                        problems.add(*line, e);
                    }
                }
            }
        }
    }
    thresholds
}

/// The regression budgets: the rows of a table of the thresholds section with columns metric,
/// budget and action (and optionally detects), one budget per metric and action.
fn budget_rows(doc: &Doc<'_>, problems: &mut Problems<'_>) -> Vec<BudgetRow> {
    let mut out: Vec<BudgetRow> = Vec::new();
    for table in &doc.scan.tables {
        if !doc.in_section(table.line, SectionKind::Thresholds) {
            continue;
        }
        let header: Vec<String> =
            table.header.iter().map(|h| h.trim().to_ascii_lowercase()).collect();
        let col = |name: &str| header.iter().position(|h| h == name);
        let Some(budget_col) = col("budget") else { continue };
        let (Some(metric_col), Some(action_col)) = (col("metric"), col("action")) else {
            problems.add(
                table.line,
                "a regression budgets table needs the columns metric, budget and action (and \
                 optionally detects)",
            );
            continue;
        };
        let detects_col = col("detects");
        for (line, cells) in &table.rows {
            let cell = |i: usize| cells.get(i).map(|s| s.trim().trim_matches('`')).unwrap_or("");
            let detects = detects_col.map(cell).filter(|d| !d.is_empty() && *d != BLANK_CELL);
            match parse_budget_row(cell(metric_col), cell(budget_col), detects, cell(action_col)) {
                Ok(row) => {
                    if let Some(prev) =
                        out.iter().find(|b| b.metric == row.metric && b.action == row.action)
                    {
                        problems.add(
                            *line,
                            format!(
                                "metric `{}` already has a `{}` budget at line {}",
                                row.metric, row.action, prev.line
                            ),
                        );
                        continue;
                    }
                    out.push(BudgetRow { line: *line, ..row });
                }
                Err(e) => problems.add(*line, e),
            }
        }
    }
    out
}

/// What a blank cell reads as.
const BLANK_CELL: &str = "—";

/// A share of the baseline: `5%`, `5% worse`, `5 points worse`, `0.05`.
fn parse_share(text: &str) -> Option<f64> {
    let t = text.trim().trim_end_matches("worse").trim();
    let (n, scale) = if let Some(p) = t.strip_suffix('%') {
        (p, 100.0)
    } else if let Some(p) = t.strip_suffix("points").or_else(|| t.strip_suffix("point")) {
        (p, 100.0)
    } else {
        (t, 1.0)
    };
    n.trim().parse::<f64>().ok().map(|v| v / scale).filter(|v| v.is_finite())
}

/// Why a row of a regression budgets table cannot be read.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BudgetRowError {
    #[error("{0}")]
    Metric(UnknownMetric),
    /// The budget cell, as written.
    #[error("budget `{0}` is not a share of the baseline such as `5%` (`5 points` for a share)")]
    Budget(String),
    /// The detects cell, as written.
    #[error("detects `{0}` is not a share of the baseline such as `10%`")]
    Detects(String),
    #[error("{0}")]
    Action(UnknownAction),
    /// A budget the A/B gate cannot decide (a count metric, a share out of range).
    #[error("{0}")]
    Check(bench::ab::BudgetError),
}

/// One row of a regression budgets table.
pub fn parse_budget_row(
    metric: &str,
    budget: &str,
    detects: Option<&str>,
    action: &str,
) -> Result<BudgetRow, BudgetRowError> {
    let Some(def) = bench::summary::metric_def(metric) else {
        return Err(BudgetRowError::Metric(UnknownMetric(metric.to_string())));
    };
    let worse_by = parse_share(budget).ok_or_else(|| BudgetRowError::Budget(budget.to_string()))?;
    let detect = match detects {
        Some(d) => Some(parse_share(d).ok_or_else(|| BudgetRowError::Detects(d.to_string()))?),
        None => None,
    };
    let action = Action::parse(action).map_err(BudgetRowError::Action)?;
    bench::ab::BudgetCheck::new(def.path, worse_by, detect, true, "")
        .map_err(BudgetRowError::Check)?;
    Ok(BudgetRow { metric: def.path.to_string(), worse_by, detect, action, line: 0 })
}

/// The conditions of the Rollback conditions section: list items that start with a backticked
/// name (`crate::thresholds::rollback`). One condition per metric and action.
fn rollback_conditions(doc: &Doc<'_>, problems: &mut Problems<'_>) -> Vec<RollbackCondition> {
    let mut out: Vec<RollbackCondition> = Vec::new();
    for line in doc.body_lines(SectionKind::Rollback) {
        let t = doc.line(line).trim();
        let item = strip_list_marker(t);
        if item.len() == t.len() {
            continue; // not a list item: prose
        }
        match parse_condition(item) {
            None => {}
            Some(Err(errors)) => {
                for e in errors {
                    problems.add(line, e);
                }
            }
            Some(Ok(c)) => {
                if let Some(prev) =
                    out.iter().find(|o| o.metric == c.metric && o.action == c.action)
                {
                    problems.add(
                        line,
                        format!(
                            "`{}` already has a `{}` rollback condition at line {}",
                            c.metric, c.action, prev.line
                        ),
                    );
                    continue;
                }
                out.push(RollbackCondition { line, ..c });
            }
        }
    }
    out
}

/// The bench profile that scopes the thresholds: the thresholds section's `They gate runs of
/// bench profile `NAME`` line, else the Context's measured scenario. One line only.
fn thresholds_profile(doc: &Doc<'_>, problems: &mut Problems<'_>) -> Option<Located<String>> {
    let mut profile: Option<Located<String>> = None;
    let scope_lines = doc
        .body_lines(SectionKind::Thresholds)
        .into_iter()
        .filter_map(|l| gated_profile(doc.line(l)).map(|r| (l, r)))
        .collect::<Vec<_>>();
    let scope_lines = if scope_lines.is_empty() {
        doc.body_lines(SectionKind::Context)
            .into_iter()
            .filter_map(|l| scenario_profile(doc.line(l)).map(|r| (l, r)))
            .collect()
    } else {
        scope_lines
    };
    for (l, name) in scope_lines {
        match (&profile, name) {
            (None, Ok(name)) => profile = Some(Located { value: name, line: l }),
            (Some(first), _) => problems.add(
                l,
                format!(
                    "a second line naming the profile the thresholds gate (the first is at line {})",
                    first.line
                ),
            ),
            (None, Err(e)) => problems.add(l, e),
        }
    }
    profile
}

const SCENARIO_SHAPE: &str = "write `Scenario: `load.concurrency = 64`, `workload.max_tokens = \
                              128`` (settings of the resolved bench profile, TOML values)";

/// The `Scenario:` line of the thresholds section: backticked `key = value` items.
fn thresholds_scenario(doc: &Doc<'_>, problems: &mut Problems<'_>) -> Vec<(String, toml::Value)> {
    let mut out: Vec<(String, toml::Value)> = Vec::new();
    let mut seen: Option<usize> = None;
    for l in doc.body_lines(SectionKind::Thresholds) {
        let t = strip_list_marker(doc.line(l).trim());
        let Some(rest) = t.strip_prefix("Scenario:") else { continue };
        if let Some(first) = seen {
            problems.add(l, format!("a second `Scenario:` line (the first is at line {first})"));
            continue;
        }
        seen = Some(l);
        let items: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
        if items.is_empty() {
            problems.add(l, format!("`Scenario:` names no setting; {SCENARIO_SHAPE}"));
        }
        for item in items {
            let parsed = item.split_once('=').and_then(|(k, v)| {
                let k = k.trim();
                let bare = !k.is_empty()
                    && k.split('.').all(|seg| {
                        !seg.is_empty()
                            && seg.chars().all(|c| c.is_ascii_alphanumeric() || "_-".contains(c))
                    });
                let v = toml::from_str::<toml::Table>(&format!("v = {}", v.trim()))
                    .ok()
                    .and_then(|mut t| t.remove("v"));
                Some((k.to_string(), v?)).filter(|_| bare)
            });
            match parsed {
                Some(kv) => out.push(kv),
                None => problems.add(l, format!("`{item}` is not `key = value`; {SCENARIO_SHAPE}")),
            }
        }
    }
    out
}

/// Files of the record's assets directory that the record links (`](assets/NNNN-x.svg)`,
/// images or links, outside code and comments), as written: relative to the record.
fn assets(doc: &Doc<'_>) -> Vec<Located<String>> {
    let mut out = Vec::new();
    for (i, raw) in doc.lines.iter().enumerate() {
        let l = i + 1;
        if doc.scan.skip.get(l).copied().unwrap_or(false) {
            continue;
        }
        for (at, _) in raw.match_indices("](") {
            let target = raw[at + 2..].split([')', ' ']).next().unwrap_or_default();
            let target = target.strip_prefix("./").unwrap_or(target);
            if target.starts_with(super::model::ASSETS_DIR) {
                out.push(Located { value: target.to_string(), line: l });
            }
        }
    }
    out
}

/// Placeholders left from the template (outside code and comments; reported by lint).
fn placeholders(doc: &Doc<'_>) -> Vec<Located<String>> {
    let mut placeholders = Vec::new();
    for (i, raw) in doc.lines.iter().enumerate() {
        let l = i + 1;
        if doc.scan.skip.get(l).copied().unwrap_or(false) {
            continue;
        }
        for ph in find_placeholders(raw) {
            placeholders.push(Located { value: ph, line: l });
        }
    }
    placeholders
}

/// A line meant to name the bench profile the thresholds gate that names none the way the
/// template writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProfileLineError {
    /// A `They gate runs of bench profile` line without the name in backticks.
    #[error("name the profile in backticks: ``They gate runs of bench profile `NAME`.``")]
    Gated,
    /// A `Measured scenario:` line that does not begin with `profile `NAME``.
    #[error(
        "a `Measured scenario:` line must begin with the bench profile, as ``Measured scenario: \
         profile `NAME`, ...``; its thresholds apply to runs of that profile"
    )]
    Scenario,
}

/// The profile of a thresholds-section line `They gate runs of bench profile `NAME`...`.
pub fn gated_profile(raw: &str) -> Option<Result<String, ProfileLineError>> {
    let (_, rest) = raw.split_once("gate runs of bench profile")?;
    Some(backticked_name(rest.trim_start()).ok_or(ProfileLineError::Gated))
}

/// The bench profile of a `Measured scenario: profile `NAME`, ...` line: `None` for any other
/// line, an error for a scenario line that names no profile the way the template writes it.
pub fn scenario_profile(raw: &str) -> Option<Result<String, ProfileLineError>> {
    let rest = strip_list_marker(raw.trim()).trim_start_matches("**");
    let rest = rest.strip_prefix("Measured scenario:")?.trim_start_matches("**").trim_start();
    Some(rest.strip_prefix("profile ").and_then(backticked_name).ok_or(ProfileLineError::Scenario))
}

/// The non-empty name in the backticks `text` starts with.
fn backticked_name(text: &str) -> Option<String> {
    let (name, _) = text.strip_prefix('`')?.split_once('`')?;
    Some(name.trim()).filter(|n| !n.is_empty()).map(str::to_string)
}

/// The record number in a file name `NNNN-slug.md`.
pub fn number_from_file_name(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let digits: String = name.chars().take_while(|c| c.is_ascii_digit()).collect();
    if digits.len() == 4 && name[4..].starts_with('-') { digits.parse().ok() } else { None }
}

fn line_at<'a>(lines: &[&'a str], line: usize) -> &'a str {
    lines.get(line.wrapping_sub(1)).copied().unwrap_or("")
}

struct Field {
    key: String,
    value: String,
    line: usize,
}

struct FrontMatter {
    /// Lines the front matter occupies (0 when there is none).
    end: usize,
    fields: Vec<Field>,
}

fn front_matter(lines: &[&str], p: &mut impl FnMut(usize, String)) -> FrontMatter {
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
fn field(raw: &str, line: usize) -> Option<Field> {
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
pub(crate) fn strip_list_marker(t: &str) -> &str {
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

/// A date that is not in ISO-8601 calendar form, as written (trimmed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("date `{0}` is not an ISO-8601 date (YYYY-MM-DD)")]
pub struct DateError(pub String);

/// A date in ISO-8601 calendar form, `YYYY-MM-DD`.
pub fn parse_iso_date(s: &str) -> Result<chrono::NaiveDate, DateError> {
    let s = s.trim();
    let shape_ok = s.len() == 10
        && s.bytes()
            .enumerate()
            .all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() });
    match shape_ok.then(|| chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()).flatten() {
        Some(d) => Ok(d),
        None => Err(DateError(s.to_string())),
    }
}

/// The text of a line if it is meant as a decision line (it starts with `configs/`).
fn decision_candidate(raw: &str) -> Option<&str> {
    let t = strip_list_marker(raw.trim());
    let t = match t.strip_prefix('`').and_then(|r| r.strip_suffix('`')) {
        Some(inner) if !inner.contains('`') => inner.trim(),
        _ => t,
    };
    t.starts_with("configs/").then_some(t)
}

/// The two shapes of a decision line, for messages.
pub const DECISION_LINE_SHAPES: &str = "a decision line is `configs/<file>.toml: section.key = value` \
     (value in TOML) or `configs/<file>.toml: section.key removed`";

/// A line meant as a decision line that has neither shape of [`DECISION_LINE_SHAPES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecisionLineError {
    /// The line, without `: ` after its file.
    #[error("`{0}`: missing `: ` after the file; {DECISION_LINE_SHAPES}")]
    NoFile(String),
    #[error("`{0}` is not a file under configs/ ending in .toml; {DECISION_LINE_SHAPES}")]
    BadFile(String),
    #[error("`{0}` is not a dotted key (section.key); {DECISION_LINE_SHAPES}")]
    BadKey(String),
    /// The line, with neither ` = value` nor ` removed`.
    #[error("`{0}`: missing ` = value` (or ` removed`); {DECISION_LINE_SHAPES}")]
    NoValue(String),
    /// The key, with nothing after its `=`.
    #[error("`{0}` has no value; {DECISION_LINE_SHAPES}")]
    EmptyValue(String),
    #[error("`{0}` is not a TOML value (quote strings: \"fcfs\"); {DECISION_LINE_SHAPES}")]
    NotToml(String),
}

/// Parse `configs/<file>.toml: section.key = value` (the value is TOML) or
/// `configs/<file>.toml: section.key removed` (the key is taken out of the file; a `# comment`
/// may follow, as after a TOML value).
pub fn parse_decision_line(s: &str) -> Result<(String, String, Decided), DecisionLineError> {
    let s = s.trim();
    let Some((file, rest)) = s.split_once(": ") else {
        return Err(DecisionLineError::NoFile(s.to_string()));
    };
    let file = file.trim();
    let file_ok = file.starts_with("configs/")
        && file.ends_with(".toml")
        && file.len() > "configs/.toml".len()
        && file.split('/').all(|seg| !seg.is_empty() && seg != "." && seg != "..")
        && file.chars().all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c));
    if !file_ok {
        return Err(DecisionLineError::BadFile(file.to_string()));
    }
    let key_ok = |key: &str| {
        !key.is_empty()
            && key.split('.').all(|seg| {
                !seg.is_empty()
                    && seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            })
    };
    let Some((key, value)) = rest.split_once('=') else {
        let without_comment = rest.split_once('#').map_or(rest, |(before, _)| before);
        let words: Vec<&str> = without_comment.split_whitespace().collect();
        return match words.as_slice() {
            [key, "removed"] if key_ok(key) => {
                Ok((file.to_string(), key.to_string(), Decided::Removed))
            }
            [key, "removed"] => Err(DecisionLineError::BadKey(key.to_string())),
            _ => Err(DecisionLineError::NoValue(s.to_string())),
        };
    };
    let key = key.trim();
    if !key_ok(key) {
        return Err(DecisionLineError::BadKey(key.to_string()));
    }
    let value = value.trim();
    if value.is_empty() {
        return Err(DecisionLineError::EmptyValue(key.to_string()));
    }
    let parsed: Result<toml::Table, _> = toml::from_str(&format!("v = {value}"));
    match parsed.ok().and_then(|mut t| t.remove("v")) {
        Some(v) => Ok((file.to_string(), key.to_string(), Decided::Set(v))),
        None => Err(DecisionLineError::NotToml(value.to_string())),
    }
}

/// A supersession line (`Supersedes`, `Superseded by`, `Supersedes in part`) that cannot be
/// read; each holds the line or the item as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("`{0}` names no record; write `Supersedes NNNN` or `Superseded by NNNN`")]
    NoRecord(String),
    #[error("`{0}` names nothing it takes over; {PARTS_SHAPE}")]
    NothingTakenOver(String),
    #[error("`{0}` is not `configs/<file>.toml: section.key`; {PARTS_SHAPE}")]
    NotKey(String),
    #[error(
        "`{0}` is neither a metric of the registry nor `configs/<file>.toml: section.key`; \
         {PARTS_SHAPE}"
    )]
    NotPart(String),
}

/// A line of the Links section: `None` when it is no supersession line.
fn parse_link(raw: &str, line: usize) -> Option<Result<Link, LinkError>> {
    let t = strip_list_marker(raw.trim()).trim_start_matches(['*', '_']);
    let lower = t.to_ascii_lowercase();
    let (kind, rest) = if let Some(r) = lower.strip_prefix("superseded by") {
        (LinkKind::SupersededBy, r)
    } else if let Some(r) = lower.strip_prefix("supersedes in part") {
        (LinkKind::SupersedesInPart, r)
    } else if let Some(r) = lower.strip_prefix("supersedes") {
        (LinkKind::Supersedes, r)
    } else {
        return None;
    };
    let Some(number) = super::model::first_number(rest) else {
        return Some(Err(LinkError::NoRecord(t.trim().to_string())));
    };
    let target = t.find("](").and_then(|i| {
        let after = &t[i + 2..];
        after.find(')').map(|j| after[..j].trim().to_string())
    });
    let parts = if kind == LinkKind::SupersedesInPart {
        match parse_parts(t) {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        }
    } else {
        Vec::new()
    };
    Some(Ok(Link { kind, number, target, line, parts }))
}

const PARTS_SHAPE: &str = "write `Supersedes in part NNNN: metric, ..., configs/<file>.toml: \
                           section.key, ...` (the metrics of its thresholds and the keys of its \
                           decision lines that this record takes over)";

/// The list after the `:` of a `Supersedes in part NNNN: ...` line: metrics of the registry and
/// `configs/<file>.toml: key` items, comma-separated, each optionally in backticks.
fn parse_parts(t: &str) -> Result<Vec<Part>, LinkError> {
    let digit = t.find(|c: char| c.is_ascii_digit()).unwrap_or(0);
    let Some(colon) = t[digit..].find(':').map(|i| digit + i) else {
        return Err(LinkError::NothingTakenOver(t.trim().to_string()));
    };
    let mut parts = Vec::new();
    for item in t[colon + 1..].split(',') {
        let item = item.trim().trim_end_matches('.').trim().trim_matches('`').trim();
        if item.is_empty() {
            continue;
        }
        if let Some((file, key)) = item.split_once(':').filter(|_| item.starts_with("configs/")) {
            let (file, key) = (file.trim(), key.trim().trim_matches('`'));
            let bare = |s: &str| {
                !s.is_empty()
                    && s.split('.').all(|seg| {
                        !seg.is_empty()
                            && seg.chars().all(|c| c.is_ascii_alphanumeric() || "_-".contains(c))
                    })
            };
            if !file.ends_with(".toml") || !bare(key) {
                return Err(LinkError::NotKey(item.to_string()));
            }
            parts.push(Part::Key { file: file.to_string(), key: key.to_string() });
        } else if bench::summary::metric_def(item).is_some() {
            parts.push(Part::Metric(item.to_string()));
        } else {
            return Err(LinkError::NotPart(item.to_string()));
        }
    }
    if parts.is_empty() {
        return Err(LinkError::NothingTakenOver(t.trim().to_string()));
    }
    Ok(parts)
}

/// The optional column of a thresholds table that keys a row to the environment it holds for.
pub const ENVIRONMENT_COLUMN: &str = "environment";

/// An `Environment` cell that is no environment key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}, or `any` for any environment")]
pub struct EnvironmentCellError(pub bench::envkey::KeyError);

/// An `Environment` cell: blank, `any` or `—` for any environment, else an environment key
/// (`bench::envkey`), backticks optional.
pub fn parse_environment_cell(
    cell: &str,
) -> Result<Option<bench::envkey::EnvironmentKey>, EnvironmentCellError> {
    let t = cell.trim().trim_matches('`').trim();
    if t.is_empty()
        || t.eq_ignore_ascii_case(crate::thresholds::file::ANY_ENVIRONMENT)
        || t == BLANK_CELL
    {
        return Ok(None);
    }
    t.parse().map(Some).map_err(EnvironmentCellError)
}

/// Parse the five cells of a thresholds row (metric, comparator, limit, unit, action).
pub fn parse_threshold_row(cells: [&str; 5]) -> Result<ThresholdRow, Vec<String>> {
    let [metric, comparator, limit, unit, action] = cells.map(|c| c.trim().trim_matches('`'));
    let mut errors = Vec::new();
    let def = bench::summary::metric_def(metric);
    if def.is_none() {
        errors.push(UnknownMetric(metric.to_string()).to_string());
    }
    let comparator = Comparator::parse(comparator).map_err(|e| errors.push(e.to_string())).ok();
    let value = match limit.parse::<f64>() {
        Ok(v) if v.is_finite() => Some(v),
        _ => {
            errors.push(format!(
                "limit `{limit}` is not a number (write the unit in its own column)"
            ));
            None
        }
    };
    let action = Action::parse(action).map_err(|e| errors.push(e.to_string())).ok();
    let converted = match (def, value) {
        (Some(def), Some(v)) => {
            to_metric_unit(v, unit, def.unit, metric).map_err(|e| errors.push(e.to_string())).ok()
        }
        _ => None,
    };
    // A finite limit can overflow in the conversion (`1e308 s` is 1e311 ms): refused, or it
    // would reach gate.toml as `inf`, which no reader accepts.
    let converted = match converted {
        Some(v) if !v.is_finite() => {
            errors.push(format!(
                "limit `{limit} {}` is {v} in {}, the unit of the metric: not a finite number",
                unit.trim(),
                def.map_or("", |d| d.unit)
            ));
            None
        }
        other => other,
    };
    match (def, comparator, converted, action) {
        (Some(def), Some(comparator), Some(limit), Some(action)) if errors.is_empty() => {
            Ok(ThresholdRow {
                metric: def.path.to_string(),
                comparator,
                limit,
                unit: def.unit.to_string(),
                action,
                environment: None,
                line: 0,
            })
        }
        _ => Err(errors),
    }
}

/// A metric that is not in the registry (`bench::summary::known_metrics`), as written; its
/// message names the nearest one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", unknown_metric_message(.0))]
pub struct UnknownMetric(pub String);

fn unknown_metric_message(metric: &str) -> String {
    let nearest = bench::summary::known_metrics()
        .iter()
        .map(|m| (edit_distance(metric, m.path), m.path))
        .min();
    let hint = match nearest {
        Some((d, path)) if d <= 4 => format!("did you mean `{path}`? "),
        _ => String::new(),
    };
    if metric.is_empty() {
        return "missing metric; metrics are the dotted summary.json paths listed in docs/adr/README.md".into();
    }
    format!(
        "unknown metric `{metric}`; {hint}metrics are the dotted summary.json paths listed in \
         docs/adr/README.md (e.g. metrics.ttft_ms.p99, goodput.ratio)"
    )
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// HTML elements that may appear in a record; any other `<...>` is a template placeholder.
const HTML_TAGS: &[&str] = &[
    "a", "abbr", "b", "br", "code", "del", "details", "div", "em", "hr", "i", "img", "ins", "kbd",
    "li", "mark", "ol", "p", "pre", "s", "small", "span", "strong", "sub", "summary", "sup",
    "table", "tbody", "td", "th", "thead", "tr", "u", "ul", "wbr",
];

/// Words the template uses as blanks.
const PLACEHOLDER_WORDS: &[&str] = &["NNNN", "TODO", "TBD", "FIXME"];
const DATE_BLANK: &str = "YYYY-MM-DD";

/// Template placeholders on a line, outside inline code: `<what to write>`, `NNNN`,
/// `YYYY-MM-DD`, `TODO`, `TBD`, `FIXME`, and blanks of two or more underscores (`__ ms`).
pub fn find_placeholders(line: &str) -> Vec<String> {
    let code = code_mask(line);
    let bytes = line.as_bytes();
    let plain = |i: usize, b: u8| bytes[i] == b && !code[i];
    let mut found = Vec::new();
    // <...>, reported as written (code spans inside included).
    let mut i = 0;
    while i < bytes.len() {
        if !plain(i, b'<') {
            i += 1;
            continue;
        }
        let Some(j) = (i + 1..bytes.len()).find(|&j| plain(j, b'>') || plain(j, b'<')) else {
            break;
        };
        if bytes[j] == b'<' {
            i = j;
            continue;
        }
        let inner = &line[i + 1..j];
        if is_placeholder_tag(&strip_code(inner, &code[i + 1..j])) {
            found.push(format!("<{inner}>"));
        }
        i = j + 1;
    }
    // Words, the date blank and underscore blanks, outside code.
    let is_word = |c: char| c.is_ascii_alphanumeric();
    let mut start = None;
    for (idx, c) in line.char_indices().chain(std::iter::once((line.len(), ' '))) {
        if is_word(c) {
            start.get_or_insert(idx);
        } else if let Some(s) = start.take()
            && !code[s]
            && PLACEHOLDER_WORDS.contains(&&line[s..idx])
        {
            found.push(line[s..idx].to_string());
        }
    }
    let bounded = |from: usize, to: usize| {
        !line[..from].chars().next_back().is_some_and(is_word)
            && !line[to..].chars().next().is_some_and(is_word)
    };
    for (i, _) in line.match_indices(DATE_BLANK) {
        if !code[i] && bounded(i, i + DATE_BLANK.len()) {
            found.push(DATE_BLANK.to_string());
        }
    }
    let mut i = 0;
    while i < bytes.len() {
        if !plain(i, b'_') {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && plain(i, b'_') {
            i += 1;
        }
        if i - start >= 2 && bounded(start, i) {
            found.push(line[start..i].to_string());
        }
    }
    found
}

fn is_placeholder_tag(inner: &str) -> bool {
    if !inner.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return false; // `<= 5`, `</p>`, `<!-- -->`, `< 3`
    }
    if inner.contains("://") || inner.contains('@') || inner.contains('=') || inner.contains('"') {
        return false; // autolinks, e-mail, tags with attributes
    }
    let name: String = inner.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
    let rest = inner[name.len()..].trim();
    !(HTML_TAGS.contains(&name.to_ascii_lowercase().as_str()) && (rest.is_empty() || rest == "/"))
}

/// For each byte of a line, whether it belongs to an inline code span (backticks included). A
/// backtick run closes at the next run of the same length, as in CommonMark.
fn code_mask(line: &str) -> Vec<bool> {
    let b = line.as_bytes();
    let mut mask = vec![false; b.len()];
    let run_at = |i: usize| b[i..].iter().take_while(|&&c| c == b'`').count();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'`' {
            i += 1;
            continue;
        }
        let run = run_at(i);
        let mut j = i + run;
        let close = loop {
            match (j..b.len()).find(|&k| b[k] == b'`') {
                None => break None,
                Some(k) if run_at(k) == run => break Some(k),
                Some(k) => j = k + run_at(k),
            }
        };
        match close {
            Some(k) => {
                mask[i..k + run].iter_mut().for_each(|m| *m = true);
                i = k + run;
            }
            None => i += run,
        }
    }
    mask
}

/// `text` without the bytes `mask` marks (code spans start and end at ASCII backticks, so what
/// remains is valid UTF-8).
fn strip_code(text: &str, mask: &[bool]) -> String {
    text.char_indices().filter(|(i, _)| !mask[*i]).map(|(_, c)| c).collect()
}

struct Heading {
    level: u8,
    line: usize,
    text: String,
}

struct Table {
    line: usize,
    header: Vec<String>,
    rows: Vec<(usize, Vec<String>)>,
}

/// What pulldown-cmark tells about the structure. Line-indexed vectors have `lines + 2`
/// entries so 1-based lines index them directly.
struct Scan {
    headings: Vec<Heading>,
    tables: Vec<Table>,
    /// Lines inside fenced/indented code or an HTML comment: not read for fields or values.
    skip: Vec<bool>,
    /// Lines inside an HTML comment (not content).
    comment: Vec<bool>,
    /// Lines of tables.
    table: Vec<bool>,
}

fn scan_markdown(md: &str) -> Scan {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_lines_parse_with_toml_values() {
        let (f, k, v) =
            parse_decision_line("configs/engine.toml: scheduler.max_num_seqs = 128").unwrap();
        assert_eq!(
            (f.as_str(), k.as_str(), v),
            ("configs/engine.toml", "scheduler.max_num_seqs", Decided::Set(128.into()))
        );
        let (_, _, v) =
            parse_decision_line("configs/engine.toml: scheduler.policy = \"fcfs\"").unwrap();
        assert_eq!(v, Decided::Set("fcfs".into()));
        let (_, _, v) = parse_decision_line("configs/a/engine-b.toml: x = [1, 2] # why").unwrap();
        assert_eq!(v, Decided::Set(toml::Value::Array(vec![1.into(), 2.into()])));
        // A string value that reads "removed" is a value, not a removal.
        let (_, _, v) = parse_decision_line("configs/e.toml: a.b = \"removed\"").unwrap();
        assert_eq!(v, Decided::Set("removed".into()));
        for bad in [
            "configs/engine.toml scheduler.x = 1",
            "configs/../etc.toml: a.b = 1",
            "configs/engine.yaml: a.b = 1",
            "configs/engine.toml: a..b = 1",
            "configs/engine.toml: a.b =",
            "configs/engine.toml: a.b = fcfs",
            "configs/engine.toml: a.b",
            "configs/engine.toml: a.b deleted",
            "configs/engine.toml: a.b removed now",
            "configs/engine.toml: a..b removed",
            "configs/engine.toml: removed",
        ] {
            assert!(parse_decision_line(bad).is_err(), "{bad}");
        }
        let e = parse_decision_line("configs/engine.toml: a.b").unwrap_err();
        assert!(e.to_string().contains("section.key removed"), "{e}");
    }

    #[test]
    fn removal_lines_name_a_key_without_a_value() {
        for line in [
            "configs/engine.toml: scheduler.max_num_batched_tokens removed",
            "configs/engine.toml:  scheduler.max_num_batched_tokens   removed  ",
            "configs/engine.toml: scheduler.max_num_batched_tokens removed # default applies",
        ] {
            let (f, k, v) = parse_decision_line(line).unwrap();
            assert_eq!(
                (f.as_str(), k.as_str(), v),
                ("configs/engine.toml", "scheduler.max_num_batched_tokens", Decided::Removed),
                "{line}"
            );
        }
        let d = DecisionLine {
            file: "configs/e.toml".into(),
            key: "a.b".into(),
            value: Decided::Removed,
            line: 3,
        };
        assert_eq!(d.to_string(), "configs/e.toml: a.b removed");
        let d = DecisionLine { value: Decided::Set(2.into()), ..d };
        assert_eq!(d.to_string(), "configs/e.toml: a.b = 2");
    }

    #[test]
    fn placeholders_are_found_outside_code() {
        assert_eq!(
            find_placeholders("# ADR-NNNN: <decision title>"),
            vec!["<decision title>", "NNNN"]
        );
        assert_eq!(find_placeholders("TTFT P99 < __ ms"), vec!["__"]);
        assert_eq!(find_placeholders("- Date: YYYY-MM-DD"), vec!["YYYY-MM-DD"]);
        assert!(
            find_placeholders("`configs/<file>.toml` and `NNNN` and ``a ` <b c> `` x").is_empty()
        );
        assert_eq!(
            find_placeholders("<name values, one `configs/<f>.toml: a.b = v` line each>"),
            vec!["<name values, one `configs/<f>.toml: a.b = v` line each>"]
        );
        assert_eq!(find_placeholders("an `unclosed <tag one>"), vec!["<tag one>"]);
        assert!(
            find_placeholders("limit <= 200, goodput >= 0.9; a<br>b <https://x.y> <!-- c -->")
                .is_empty()
        );
        assert!(find_placeholders("max_num_seqs and __init__ and snake__case").is_empty());
        assert_eq!(find_placeholders("TODO: write"), vec!["TODO"]);
    }

    #[test]
    fn fields_tolerate_bold_and_lists() {
        let f = field("- **Status:** Accepted", 3).unwrap();
        assert_eq!((f.key.as_str(), f.value.as_str()), ("status", "Accepted"));
        let f = field("**Date**: 2025-01-02", 4).unwrap();
        assert_eq!((f.key.as_str(), f.value.as_str()), ("date", "2025-01-02"));
        assert!(field("- Scope: all", 5).is_none());
    }

    #[test]
    fn the_measured_scenario_names_the_profile_thresholds_apply_to() {
        let ok = |l: &str| scenario_profile(l).map(|r| r.unwrap());
        assert_eq!(
            ok("Measured scenario: profile `llama-cpp`, target `llama-cpp` (model x); closed loop"),
            Some("llama-cpp".into())
        );
        assert_eq!(ok("**Measured scenario:** profile `default`."), Some("default".into()));
        assert_eq!(ok("The measured scenario was profile `x`"), None, "only the template's line");
        assert!(scenario_profile("Measured scenario: the default one").unwrap().is_err());
        let adr = parse_adr(
            Path::new("docs/adr/0003-x.md"),
            "# T\n\n- Status: Proposed\n\n## Context\n\nWhy.\n\nMeasured scenario: profile `tuned`, closed loop.\n",
        );
        assert_eq!(adr.profile.map(|p| (p.value, p.line)), Some(("tuned".to_string(), 9)));
        let adr = parse_adr(Path::new("docs/adr/0003-x.md"), "# T\n\n## Context\n\nWhy.\n");
        assert_eq!(adr.profile, None, "no scenario line: thresholds gate every run");
        // The thresholds section's own line wins over the scenario.
        let adr = parse_adr(
            Path::new("docs/adr/0003-x.md"),
            "# T\n\n## Context\n\nMeasured scenario: profile `default`.\n\n## CI gate thresholds\n\n\
             Proposed from Exp-1.\nThey gate runs of bench profile `tuned`, the profile Exp-1 was measured with.\n",
        );
        assert_eq!(adr.profile.map(|p| (p.value, p.line)), Some(("tuned".to_string(), 10)));
        assert!(gated_profile("They gate runs of bench profile tuned.").unwrap().is_err());
    }

    fn messages(adr: &Adr) -> Vec<(usize, String)> {
        adr.problems.iter().map(|p| (p.line, p.message.clone())).collect()
    }

    #[test]
    fn the_status_block_reads_each_field_once_and_names_what_is_missing() {
        let adr = parse_adr(Path::new("docs/adr/0001-x.md"), "# ADR-0001: T\n\nText.\n");
        let got = messages(&adr);
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got.iter().all(|(l, _)| *l == 1), "{got:?}");
        assert_eq!(adr.status_problems(), vec![Problem::new(&adr.path, 1, NO_STATUS)]);
        let adr = parse_adr(
            Path::new("docs/adr/0001-x.md"),
            "# T\n\n- Status: Acepted\n- Date: 2025-01-01\n- Date: 2025-01-02\n- Deciders: \n",
        );
        let got = messages(&adr);
        assert!(got[0].0 == 3 && got[0].1.starts_with("unknown status `Acepted`"), "{got:?}");
        assert_eq!(got[1], (5, "`date` is given twice (first at line 4)".to_string()));
        assert_eq!(got[2], (6, "deciders are empty; name who decided".to_string()));
        assert_eq!(adr.status_line, Some(3));
        assert_eq!(adr.status_problems().len(), 1);
        assert_eq!(adr.date.map(|d| d.line), Some(4));
    }

    #[test]
    fn threshold_tables_need_their_columns_and_one_row_per_metric_and_action() {
        let head = "# T\n\n- Status: Proposed\n- Date: 2025-01-01\n- Deciders: a\n\n## CI gate thresholds\n\n";
        let adr = parse_adr(
            Path::new("docs/adr/0001-x.md"),
            &format!("{head}| Metric | Limit |\n|---|---|\n| goodput.ratio | 0.9 |\n"),
        );
        assert_eq!(adr.thresholds, vec![]);
        assert_eq!(messages(&adr).len(), 1);
        assert!(
            messages(&adr)[0].1.contains("`comparator`, `unit`, `action`"),
            "{:?}",
            adr.problems
        );
        let adr = parse_adr(
            Path::new("docs/adr/0001-x.md"),
            &format!(
                "{head}| Action | Metric | Comparator | Limit | Unit |\n|---|---|---|---|---|\n\
                 | block | goodput.ratio | >= | 90 | % |\n| warn | goodput.ratio | >= | 0.95 | ratio |\n\
                 | block | `goodput.ratio` | >= | 0.8 | ratio |\n"
            ),
        );
        let rows: Vec<(f64, Action, usize)> =
            adr.thresholds.iter().map(|t| (t.limit, t.action, t.line)).collect();
        assert_eq!(rows, vec![(0.9, Action::Block, 11), (0.95, Action::Warn, 12)]);
        assert_eq!(
            messages(&adr),
            vec![(13, "metric `goodput.ratio` already has a `block` threshold at line 11".into())]
        );
    }

    #[test]
    fn a_second_profile_line_is_a_problem() {
        let adr = parse_adr(
            Path::new("docs/adr/0001-x.md"),
            "# T\n\n## CI gate thresholds\n\nThey gate runs of bench profile `a`.\n\
             They gate runs of bench profile `b`.\n",
        );
        assert_eq!(adr.profile.map(|p| (p.value, p.line)), Some(("a".to_string(), 5)));
        assert!(
            adr.problems.iter().any(|p| p.line == 6 && p.message.contains("first is at line 5")),
            "{:?}",
            adr.problems
        );
    }

    /// The Environment column keys a row; blank, `any` and a dash hold for any environment;
    /// a bad key is a problem at its row naming what is valid; one metric may have a threshold
    /// per environment.
    #[test]
    fn the_environment_column_keys_rows_and_names_bad_keys() {
        let h100 = "gpu=H100-SXM-80GB x1; engine=infergate-sim; model=m; dtype=bfloat16";
        let a100 = h100.replace("H100-SXM-80GB", "A100-80GB");
        let adr = parse_adr(
            Path::new("docs/adr/0001-x.md"),
            &format!(
                "# T\n\n## CI gate thresholds\n\n\
                 | Metric | Comparator | Limit | Unit | Action | Environment |\n|---|---|---|---|---|---|\n\
                 | `metrics.ttft_ms.p99` | <= | 100 | ms | block | `{h100}` |\n\
                 | `metrics.ttft_ms.p99` | <= | 200 | ms | block | {a100} |\n\
                 | `goodput.ratio` | >= | 0.9 | ratio | block | any |\n\
                 | `error_rate` | <= | 0.01 | ratio | block | \u{2014} |\n\
                 | `requests.failed` | == | 0 | count | block | gpu=H100 |\n\
                 | `metrics.ttft_ms.p99` | <= | 150 | ms | block | {h100} |\n"
            ),
        );
        let envs: Vec<(usize, Option<String>)> = adr
            .thresholds
            .iter()
            .map(|t| (t.line, t.environment.as_ref().map(|e| e.to_string())))
            .collect();
        assert_eq!(
            envs,
            vec![(7, Some(h100.to_string())), (8, Some(a100.clone())), (9, None), (10, None)]
        );
        let at = |line: usize| -> Vec<&str> {
            adr.problems.iter().filter(|p| p.line == line).map(|p| p.message.as_str()).collect()
        };
        assert!(
            at(11).iter().any(|m| m.contains("environment `gpu=H100` is not valid")
                && m.contains("gpu=NAME xCOUNT; engine=ENGINE")
                && m.contains("or `any`")),
            "{:?}",
            adr.problems
        );
        assert!(
            at(12).iter().any(|m| m.contains("already has a `block` threshold for environment")
                && m.contains("at line 7")),
            "{:?}",
            adr.problems
        );
    }

    #[test]
    fn iso_dates_only() {
        assert!(parse_iso_date("2025-02-28").is_ok());
        assert!(parse_iso_date("2025-02-30").is_err());
        assert!(parse_iso_date("2025-2-3").is_err());
        assert!(parse_iso_date("28.02.2025").is_err());
    }
}
