//! Each part of a record gathered from its section, the last phase: the status block (each
//! field once, none missing), the decision lines, links, thresholds and budget rows (one per
//! metric and action), rollback conditions, the profile and scenario the thresholds gate (one
//! line each), the assets linked and the template's blanks left. Values are read by
//! [`super::values`]; what cannot be read, or contradicts what came before, is a [`Problem`]
//! at its line.

use std::fmt;
use std::path::Path;

use infergate_model::config::ConfigKey;

use super::markdown::{Doc, Field, FrontMatter, field, strip_list_marker};
use super::placeholders::find_placeholders;
use super::values::{
    BLANK_CELL, ENVIRONMENT_COLUMN, LOAD_COLUMN, decision_candidate, gated_profile,
    parse_budget_row, parse_decision_line, parse_environment_cell, parse_iso_date, parse_link,
    parse_load_cell, parse_threshold_row, scenario_profile, scenario_setting,
};
use crate::adr::model::{
    AdrStatus, BudgetRow, DecisionLine, Link, Located, NO_STATUS, Problem, SectionKind,
    ThresholdRow,
};
use crate::thresholds::rollback::{RollbackCondition, parse_condition};

/// The problems met while parsing one record.
pub(super) struct Problems<'a> {
    pub(super) path: &'a Path,
    pub(super) list: Vec<Problem>,
}

impl Problems<'_> {
    pub(super) fn add(&mut self, line: usize, message: impl fmt::Display) {
        self.list.push(Problem::new(self.path, line, message.to_string()));
    }
}

/// The status, date and deciders of a record, with the line the status was written at.
pub(super) struct StatusBlock {
    pub(super) status: Option<Located<AdrStatus>>,
    pub(super) status_line: Option<usize>,
    pub(super) date: Option<Located<chrono::NaiveDate>>,
    pub(super) deciders: Option<Located<String>>,
}

/// The status block: between the H1 and the first H2, plus front matter and a `## Status`
/// section. Each field is read once; a missing or invalid one is a problem.
pub(super) fn status_block(
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
pub(super) fn decision_lines(doc: &Doc<'_>, problems: &mut Problems<'_>) -> Vec<DecisionLine> {
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
pub(super) fn links(doc: &Doc<'_>, problems: &mut Problems<'_>) -> Vec<Link> {
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
pub(super) fn threshold_rows(doc: &Doc<'_>, problems: &mut Problems<'_>) -> Vec<ThresholdRow> {
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
        let load_col = col(LOAD_COLUMN);
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
            let load = match parse_load_cell(load_col.and_then(|i| cells.get(i)).map_or("", |s| s))
            {
                Ok(load) => load,
                Err(e) => {
                    problems.add(*line, e);
                    continue;
                }
            };
            match parse_threshold_row([cell(0), cell(1), cell(2), cell(3), cell(4)]) {
                Ok(row) => {
                    let row = ThresholdRow { line: *line, environment, load, ..row };
                    if let Some(prev) = thresholds.iter().find(|t| {
                        t.metric == row.metric
                            && t.action == row.action
                            && t.environment == row.environment
                            && t.load == row.load
                    }) {
                        let env = row
                            .environment
                            .as_ref()
                            .map_or(String::new(), |e| format!(" for environment `{e}`"));
                        let env = match &row.load {
                            Some(l) => format!("{env} at {l}"),
                            None => env,
                        };
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
pub(super) fn budget_rows(doc: &Doc<'_>, problems: &mut Problems<'_>) -> Vec<BudgetRow> {
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

/// The conditions of the Rollback conditions section: list items that start with a backticked
/// name (`crate::thresholds::rollback`). One condition per metric and action.
pub(super) fn rollback_conditions(
    doc: &Doc<'_>,
    problems: &mut Problems<'_>,
) -> Vec<RollbackCondition> {
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
pub(super) fn thresholds_profile(
    doc: &Doc<'_>,
    problems: &mut Problems<'_>,
) -> Option<Located<String>> {
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
pub(super) fn thresholds_scenario(
    doc: &Doc<'_>,
    problems: &mut Problems<'_>,
) -> Vec<(ConfigKey, toml::Value)> {
    let mut out: Vec<(ConfigKey, toml::Value)> = Vec::new();
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
            let parsed = scenario_setting(item);
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
pub(super) fn assets(doc: &Doc<'_>) -> Vec<Located<String>> {
    let mut out = Vec::new();
    for (i, raw) in doc.lines.iter().enumerate() {
        let l = i + 1;
        if doc.scan.skip.get(l).copied().unwrap_or(false) {
            continue;
        }
        for (at, _) in raw.match_indices("](") {
            let target = raw[at + 2..].split([')', ' ']).next().unwrap_or_default();
            let target = target.strip_prefix("./").unwrap_or(target);
            if target.starts_with(crate::adr::model::ASSETS_DIR) {
                out.push(Located { value: target.to_string(), line: l });
            }
        }
    }
    out
}

/// Placeholders left from the template (outside code and comments; reported by lint).
pub(super) fn placeholders(doc: &Doc<'_>) -> Vec<Located<String>> {
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
