//! One line or table cell of a record read into a typed value, the second phase: a date, a
//! decision line, a supersession link, a threshold or regression-budget row, an environment
//! cell, the profile a scope line names, a scenario setting. Each returns its value or a typed
//! error whose message says what is valid; where in the record a value is looked for, and
//! what is wrong among several, is [`super::sections`]'s.

use infergate_model::config::ConfigKey;

use super::markdown::strip_list_marker;
use crate::adr::model::{BudgetRow, Decided, Link, LinkKind, Part, ThresholdRow};
use crate::thresholds::rule::UnknownAction;
use crate::thresholds::units::to_metric_unit;
use crate::thresholds::{Action, Comparator};

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

/// The text of a line if it is meant as a decision line: it starts with `configs/`, or with a
/// repository path (no spaces; a directory or an extension in it, or a `Dockerfile` or
/// `Containerfile`) followed by `: ` and a dotted key with at least one dot, then ` = ` or
/// ` removed` (a governed source anywhere in the repository: `deploy/helm/values.yaml:
/// scheduler.max_num_seqs = 128`). Prose such as `Note: a = b` or `Before: scheduler.x = 1` is
/// not one.
pub(super) fn decision_candidate(raw: &str) -> Option<&str> {
    let t = strip_list_marker(raw.trim());
    let t = match t.strip_prefix('`').and_then(|r| r.strip_suffix('`')) {
        Some(inner) if !inner.contains('`') => inner.trim(),
        _ => t,
    };
    if t.starts_with("configs/") {
        return Some(t);
    }
    let (file, rest) = t.split_once(": ")?;
    let key_end = rest.find([' ', '=']).unwrap_or(rest.len());
    let (key, after) = rest.split_at(key_end);
    let after = after.trim_start();
    let path_like = file.contains(['/', '.'])
        || file.starts_with("Dockerfile")
        || file.starts_with("Containerfile");
    let shaped = path_like
        && file_ok(file)
        && ConfigKey::parse(key).is_ok_and(|k| k.segments().len() >= 2)
        && (after.starts_with('=') || after.starts_with("removed"));
    shaped.then_some(t)
}

/// A repository file as a decision line names it: `/`-separated, letters, digits and `_-.`,
/// no empty, `.` or `..` segment, not absolute.
fn file_ok(file: &str) -> bool {
    !file.is_empty()
        && file.split('/').all(|seg| !seg.is_empty() && seg != "." && seg != "..")
        && file.chars().all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
}

/// The two shapes of a decision line, for messages.
pub const DECISION_LINE_SHAPES: &str = "a decision line is `configs/<file>.toml: section.key = value` \
     (value in TOML) or `configs/<file>.toml: section.key removed`; a governed source elsewhere \
     in the repository is named by its path (`deploy/helm/values.yaml: scheduler.max_num_seqs = 128`)";

/// A line meant as a decision line that has neither shape of [`DECISION_LINE_SHAPES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecisionLineError {
    /// The line, without `: ` after its file.
    #[error("`{0}`: missing `: ` after the file; {DECISION_LINE_SHAPES}")]
    NoFile(String),
    #[error(
        "`{0}` is not a path of a file of the repository (letters, digits, `_-./`, no `.` or \
         `..` segment; a file under configs/ ends in .toml); {DECISION_LINE_SHAPES}"
    )]
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
pub fn parse_decision_line(s: &str) -> Result<(String, ConfigKey, Decided), DecisionLineError> {
    let s = s.trim();
    let Some((file, rest)) = s.split_once(": ") else {
        return Err(DecisionLineError::NoFile(s.to_string()));
    };
    let file = file.trim();
    let configs_file = !file.starts_with("configs/")
        || (file.ends_with(".toml") && file.len() > "configs/.toml".len());
    if !file_ok(file) || !configs_file {
        return Err(DecisionLineError::BadFile(file.to_string()));
    }
    let parse_key =
        |key: &str| ConfigKey::parse(key).map_err(|_| DecisionLineError::BadKey(key.to_string()));
    let Some((key, value)) = rest.split_once('=') else {
        let without_comment = rest.split_once('#').map_or(rest, |(before, _)| before);
        let words: Vec<&str> = without_comment.split_whitespace().collect();
        return match words.as_slice() {
            [key, "removed"] => Ok((file.to_string(), parse_key(key)?, Decided::Removed)),
            _ => Err(DecisionLineError::NoValue(s.to_string())),
        };
    };
    let key = parse_key(key.trim())?;
    let value = value.trim();
    if value.is_empty() {
        return Err(DecisionLineError::EmptyValue(key.to_string()));
    }
    let parsed: Result<toml::Table, _> = toml::from_str(&format!("v = {value}"));
    match parsed.ok().and_then(|mut t| t.remove("v")) {
        Some(v) => Ok((file.to_string(), key, Decided::Set(v))),
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
pub(super) fn parse_link(raw: &str, line: usize) -> Option<Result<Link, LinkError>> {
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
    let Some(number) = crate::adr::model::first_number(rest) else {
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
            let key = ConfigKey::parse(key).ok().filter(|k| k.is_bare() && file.ends_with(".toml"));
            let Some(key) = key else {
                return Err(LinkError::NotKey(item.to_string()));
            };
            parts.push(Part::Key { file: file.to_string(), key });
        } else if let Ok(metric) = MetricPath::parse(item) {
            parts.push(Part::Metric(metric));
        } else {
            return Err(LinkError::NotPart(item.to_string()));
        }
    }
    if parts.is_empty() {
        return Err(LinkError::NothingTakenOver(t.trim().to_string()));
    }
    Ok(parts)
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

/// One backticked item of a `Scenario:` line: `key = value`, the key dotted bare words, the
/// value TOML; `None` when it is not.
pub(super) fn scenario_setting(item: &str) -> Option<(ConfigKey, toml::Value)> {
    let (k, v) = item.split_once('=')?;
    let k = ConfigKey::parse(k.trim()).ok().filter(ConfigKey::is_bare);
    let v = toml::from_str::<toml::Table>(&format!("v = {}", v.trim()))
        .ok()
        .and_then(|mut t| t.remove("v"));
    Some((k?, v?))
}

/// What a blank cell reads as.
pub(super) const BLANK_CELL: &str = "—";

/// The optional column of a thresholds table that keys a row to the environment it holds for.
pub const ENVIRONMENT_COLUMN: &str = "environment";

/// An `Environment` cell that is no environment key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}, or `any` for any environment")]
pub struct EnvironmentCellError(pub infergate_model::envkey::KeyError);

/// An `Environment` cell: blank, `any` or `—` for any environment, else an environment key
/// (`infergate_model::envkey`), backticks optional.
pub fn parse_environment_cell(
    cell: &str,
) -> Result<Option<infergate_model::envkey::EnvironmentKey>, EnvironmentCellError> {
    let t = cell.trim().trim_matches('`').trim();
    if t.is_empty()
        || t.eq_ignore_ascii_case(crate::thresholds::file::ANY_ENVIRONMENT)
        || t == BLANK_CELL
    {
        return Ok(None);
    }
    t.parse().map(Some).map_err(EnvironmentCellError)
}

/// The optional column of a thresholds table that binds a row to a load ("holds the SLO at
/// load L").
pub const LOAD_COLUMN: &str = "at load";

/// An `At load` cell: blank or `—` for every run of the profile, else a load
/// (`crate::thresholds::load`: `concurrency 24`, `rate 2.5 req/s`), backticks optional.
pub fn parse_load_cell(
    cell: &str,
) -> Result<Option<crate::thresholds::load::Load>, crate::thresholds::load::LoadError> {
    let t = cell.trim().trim_matches('`').trim();
    if t.is_empty() || t == BLANK_CELL {
        return Ok(None);
    }
    t.parse().map(Some)
}

/// Parse the five cells of a thresholds row (metric, comparator, limit, unit, action).
pub fn parse_threshold_row(cells: [&str; 5]) -> Result<ThresholdRow, Vec<String>> {
    let [metric, comparator, limit, unit, action] = cells.map(|c| c.trim().trim_matches('`'));
    let mut errors = Vec::new();
    let path = MetricPath::parse(metric).map_err(|e| errors.push(e.to_string())).ok();
    let def = path.map(MetricPath::def);
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
    let converted = match (path, value) {
        (Some(path), Some(v)) => {
            to_metric_unit(v, unit, path).map_err(|e| errors.push(e.to_string())).ok()
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
    match (path, comparator, converted, action) {
        (Some(path), Some(comparator), Some(limit), Some(action)) if errors.is_empty() => {
            Ok(ThresholdRow {
                metric: path,
                comparator,
                limit,
                unit: path.unit().to_string(),
                action,
                environment: None,
                load: None,
                line: 0,
            })
        }
        _ => Err(errors),
    }
}

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
    Check(infergate_model::ab::BudgetError),
}

/// One row of a regression budgets table.
pub fn parse_budget_row(
    metric: &str,
    budget: &str,
    detects: Option<&str>,
    action: &str,
) -> Result<BudgetRow, BudgetRowError> {
    let metric = MetricPath::parse(metric).map_err(BudgetRowError::Metric)?;
    let worse_by = parse_share(budget).ok_or_else(|| BudgetRowError::Budget(budget.to_string()))?;
    let detect = match detects {
        Some(d) => Some(parse_share(d).ok_or_else(|| BudgetRowError::Detects(d.to_string()))?),
        None => None,
    };
    let action = Action::parse(action).map_err(BudgetRowError::Action)?;
    infergate_model::ab::BudgetCheck::new(metric, worse_by, detect, true, "")
        .map_err(BudgetRowError::Check)?;
    Ok(BudgetRow { metric, worse_by, detect, action, line: 0 })
}

use infergate_model::metric::MetricPath;
/// A metric that is not in the registry, as written; its message names the nearest one.
pub use infergate_model::metric::UnknownMetric;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_lines_name_any_repository_file_and_prose_is_not_one() {
        for line in [
            "- configs/engine.toml: scheduler.max_num_seqs = 128",
            "- deploy/helm/values.yaml: scheduler.max_num_seqs = 128",
            "- `docker-compose.yml: scheduler.max_num_seqs = 128`",
            "- Dockerfile: scheduler.max_num_seqs = 4",
            "- scripts/serve.sh: unmapped.\"--kv-cache-dtype\" = \"fp8\"",
            "- deploy/k8s/vllm.yaml: scheduler.enable_chunked_prefill removed",
        ] {
            let c = decision_candidate(line).unwrap_or_else(|| panic!("{line}"));
            assert!(parse_decision_line(c).is_ok(), "{line}: {:?}", parse_decision_line(c));
        }
        for prose in [
            "- Note: a = b",
            "- Before: scheduler.max_num_seqs = 256 was too many",
            "Why: the tail = P99",
        ] {
            assert_eq!(decision_candidate(prose), None, "{prose}");
        }
    }
    use crate::adr::model::DecisionLine;

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
            key: ConfigKey::literal("a.b"),
            value: Decided::Removed,
            line: 3,
        };
        assert_eq!(d.to_string(), "configs/e.toml: a.b removed");
        let d = DecisionLine { value: Decided::Set(2.into()), ..d };
        assert_eq!(d.to_string(), "configs/e.toml: a.b = 2");
    }

    #[test]
    fn iso_dates_only() {
        assert!(parse_iso_date("2025-02-28").is_ok());
        assert!(parse_iso_date("2025-02-30").is_err());
        assert!(parse_iso_date("2025-2-3").is_err());
        assert!(parse_iso_date("28.02.2025").is_err());
    }
}
