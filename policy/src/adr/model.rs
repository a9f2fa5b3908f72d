//! The typed decision record and the values it holds.

use std::fmt;
use std::path::PathBuf;

use infergate_model::config::ConfigKey;

use crate::thresholds::rollback::RollbackCondition;
use crate::thresholds::{Action, Comparator};

/// A problem found in a file, printed as `path:line: message` (lines are 1-based).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    pub path: PathBuf,
    pub line: usize,
    pub message: String,
}

impl Problem {
    pub fn new(path: impl Into<PathBuf>, line: usize, message: impl Into<String>) -> Problem {
        Problem { path: path.into(), line: line.max(1), message: message.into() }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path.display(), self.line, self.message)
    }
}

/// A value and the 1-based line it was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located<T> {
    pub value: T,
    pub line: usize,
}

/// The directory, beside the records, of the files a record links (its charts), as the record
/// links them: `assets/NNNN-name.svg`, named by the record's number. `adr check` treats them as
/// part of their record.
pub const ASSETS_DIR: &str = "assets/";

/// The status of a record. Only `Accepted` records that no accepted record supersedes are live:
/// their thresholds are enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdrStatus {
    Proposed,
    Accepted,
    Rejected,
    Deprecated,
    /// `Superseded by NNNN`.
    SupersededBy(u32),
}

/// The line that starts the flag of an adopted run that misses its SLO (`adr new` writes it);
/// lint looks for it.
pub const SLO_MISSED: &str = "> **SLO missed:**";
/// The line where a person states why a configuration that misses its SLO is adopted.
pub const SLO_EXCEPTION: &str = "SLO exception:";

/// The problem of a record without a status.
pub const NO_STATUS: &str = "no status; write `- Status: Proposed` under the title";

pub const STATUS_CHOICES: &str =
    "Proposed, Accepted, Rejected, Deprecated, Superseded by NNNN (NNNN = the superseding record)";

/// A status that is none of [`STATUS_CHOICES`], as written (trimmed, without a final `.`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StatusError {
    /// `Superseded by` without a record number.
    #[error("`{0}` does not name the superseding record; write `Superseded by NNNN`")]
    NoSuperseding(String),
    #[error("unknown status `{0}`; valid: {STATUS_CHOICES}")]
    Unknown(String),
}

impl AdrStatus {
    /// Parse a status as written (case-insensitive). `Superseded by` takes the first number that
    /// follows, so `Superseded by 0003`, `Superseded by ADR-0003` and a markdown link to
    /// `0003-x.md` all work.
    pub fn parse(s: &str) -> Result<AdrStatus, StatusError> {
        let t = s.trim().trim_end_matches('.');
        let lower = t.to_ascii_lowercase();
        match lower.as_str() {
            "proposed" => return Ok(AdrStatus::Proposed),
            "accepted" => return Ok(AdrStatus::Accepted),
            "rejected" => return Ok(AdrStatus::Rejected),
            "deprecated" => return Ok(AdrStatus::Deprecated),
            _ => {}
        }
        if let Some(rest) = lower.strip_prefix("superseded by") {
            return match first_number(rest) {
                Some(n) => Ok(AdrStatus::SupersededBy(n)),
                None => Err(StatusError::NoSuperseding(t.to_string())),
            };
        }
        Err(StatusError::Unknown(t.to_string()))
    }
}

impl fmt::Display for AdrStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdrStatus::Proposed => f.write_str("Proposed"),
            AdrStatus::Accepted => f.write_str("Accepted"),
            AdrStatus::Rejected => f.write_str("Rejected"),
            AdrStatus::Deprecated => f.write_str("Deprecated"),
            AdrStatus::SupersededBy(n) => write!(f, "Superseded by {n:04}"),
        }
    }
}

/// The first run of ASCII digits in `s`, as a record number.
pub fn first_number(s: &str) -> Option<u32> {
    let start = s.find(|c: char| c.is_ascii_digit())?;
    let digits: String = s[start..].chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

/// What a decision line fixes for its key.
#[derive(Clone, Debug, PartialEq)]
pub enum Decided {
    /// `section.key = value`: the key has this value (TOML).
    Set(toml::Value),
    /// `section.key removed`: the key is absent from the file (the engine's default applies).
    Removed,
}

impl fmt::Display for Decided {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decided::Set(v) => write!(f, "= {v}"),
            Decided::Removed => f.write_str("removed"),
        }
    }
}

/// One line of a record's Decision section: `configs/<file>.toml: section.key = value`, or
/// `configs/<file>.toml: section.key removed` for a key the record takes out of the file.
#[derive(Clone, Debug, PartialEq)]
pub struct DecisionLine {
    /// The governed file, relative to the repository root (`configs/engine.toml`).
    pub file: String,
    /// Dotted key inside the file (`scheduler.max_num_seqs`).
    pub key: ConfigKey,
    /// The value the record fixes, or that the key is removed.
    pub value: Decided,
    /// 1-based line in the record.
    pub line: usize,
}

impl DecisionLine {
    /// The key's segments (`["scheduler", "max_num_seqs"]`).
    pub fn key_path(&self) -> Vec<&str> {
        self.key.path()
    }
}

impl fmt::Display for DecisionLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} {}", self.file, self.key, self.value)
    }
}

/// One row of a record's CI gate thresholds table, with the limit converted to the unit of the
/// metric registry (`infergate_model::metric::known_metrics`).
#[derive(Clone, Debug, PartialEq)]
pub struct ThresholdRow {
    /// Dotted summary.json path (`metrics.ttft_ms.p99`).
    pub metric: infergate_model::metric::MetricPath,
    pub comparator: Comparator,
    /// The limit in the registry's unit.
    pub limit: f64,
    /// The registry's unit for the metric.
    pub unit: String,
    pub action: Action,
    /// The environment the limit holds for (the table's optional `Environment` column); `None`
    /// (blank, `any`, or no such column): any environment.
    pub environment: Option<infergate_model::envkey::EnvironmentKey>,
    /// The load the limit is decided at (the table's optional `At load` column: `concurrency
    /// 24`, "holds the SLO at load L"); `None` (blank, or no such column): every run of the
    /// profile.
    pub load: Option<crate::thresholds::load::Load>,
    /// 1-based line of the table row.
    pub line: usize,
}

/// A row of a record's regression budgets table (in the thresholds section, a table with a
/// `Budget` column): how much worse than the baseline arm of an A/B gate (`bench ab`) the
/// metric may be.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetRow {
    pub metric: infergate_model::metric::MetricPath,
    /// A fraction of the baseline (positive metrics) or points (shares): `0.05`.
    pub worse_by: f64,
    /// The regression the gate must catch (absent: twice the budget).
    pub detect: Option<f64>,
    pub action: Action,
    /// 1-based line of the table row.
    pub line: usize,
}

/// Direction of a supersession link in the Links section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    Supersedes,
    SupersededBy,
    /// `Supersedes in part NNNN: ...`: the named thresholds and keys of NNNN only; NNNN stays
    /// live for the rest of its decision.
    SupersedesInPart,
}

/// What a partial supersession takes over from the older record.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    /// The older record's thresholds on this metric (all its rows of that metric).
    Metric(infergate_model::metric::MetricPath),
    /// The older record's decision line for this governed key.
    Key { file: String, key: ConfigKey },
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Part::Metric(m) => write!(f, "`{m}`"),
            Part::Key { file, key } => write!(f, "`{file}: {key}`"),
        }
    }
}

/// `Supersedes NNNN`, `Superseded by NNNN` or `Supersedes in part NNNN: ...` in the Links
/// section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub kind: LinkKind,
    pub number: u32,
    /// Target of a markdown link on the line (`0001-x.md`), when there is one.
    pub target: Option<String>,
    pub line: usize,
    /// What a `Supersedes in part` link takes over (empty for the other kinds).
    pub parts: Vec<Part>,
}

/// The sections a record may have (H2 headings), recognised by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SectionKind {
    Context,
    MetricsMatrix,
    Decision,
    Thresholds,
    Rollback,
    Consequences,
    Links,
    Reproduction,
    Status,
}

/// Sections every record must have, non-empty, with their canonical headings.
pub const REQUIRED_SECTIONS: [(SectionKind, &str); 7] = [
    (SectionKind::Context, "Context"),
    (SectionKind::MetricsMatrix, "Metrics matrix"),
    (SectionKind::Decision, "Decision"),
    (SectionKind::Thresholds, "CI gate thresholds"),
    (SectionKind::Rollback, "Rollback conditions"),
    (SectionKind::Consequences, "Consequences"),
    (SectionKind::Links, "Links"),
];

impl SectionKind {
    /// The canonical heading: a required section's from [`REQUIRED_SECTIONS`], else its own.
    pub fn heading(self) -> &'static str {
        if let Some((_, h)) = REQUIRED_SECTIONS.iter().find(|(k, _)| *k == self) {
            return h;
        }
        match self {
            SectionKind::Reproduction => "Reproduction",
            _ => "Status",
        }
    }

    /// Recognise a heading: case-insensitive, a leading `1.` style number is ignored, and a few
    /// common spellings are accepted (`Solidified rules`, `Thresholds`, `Rollback`).
    pub fn from_heading(heading: &str) -> Option<SectionKind> {
        let t = heading.trim();
        let t = t.trim_start_matches(|c: char| c.is_ascii_digit());
        let t = t.trim_start_matches(['.', ')']).trim().trim_end_matches(':').trim();
        let norm = t.split_whitespace().collect::<Vec<_>>().join(" ").to_ascii_lowercase();
        Some(match norm.as_str() {
            "context" | "context and problem statement" => SectionKind::Context,
            "metrics matrix" | "metrics" | "measurements" => SectionKind::MetricsMatrix,
            "decision"
            | "decisions"
            | "solidified rules"
            | "decision / solidified rules"
            | "decision and solidified rules"
            | "decision outcome" => SectionKind::Decision,
            "ci gate thresholds" | "gate thresholds" | "thresholds" | "ci thresholds"
            | "confirmation" => SectionKind::Thresholds,
            "rollback conditions" | "rollback" => SectionKind::Rollback,
            "consequences" => SectionKind::Consequences,
            "links" | "more information" => SectionKind::Links,
            "reproduction" => SectionKind::Reproduction,
            "status" => SectionKind::Status,
            _ => return None,
        })
    }
}

/// An H2 section: its heading and the lines of its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub kind: Option<SectionKind>,
    pub heading: String,
    /// Line of the heading.
    pub line: usize,
    /// Body: lines `line + 1 .. end` (1-based, `end` exclusive).
    pub end: usize,
    /// Whether the body holds anything besides blank lines and HTML comments.
    pub has_content: bool,
}

/// A parsed decision record. Parsing never fails: what could not be read is in `problems`.
#[derive(Clone, Debug, PartialEq)]
pub struct Adr {
    /// The path as given (relative to the repository root in every command).
    pub path: PathBuf,
    /// Number from the file name (`0007-x.md` -> 7).
    pub number: Option<u32>,
    /// Every H1 heading (a valid record has exactly one).
    pub titles: Vec<Located<String>>,
    pub status: Option<Located<AdrStatus>>,
    /// Line where a status was written (valid or not); `None` when there is none.
    pub status_line: Option<usize>,
    pub date: Option<Located<chrono::NaiveDate>>,
    pub deciders: Option<Located<String>>,
    pub sections: Vec<Section>,
    pub decisions: Vec<DecisionLine>,
    pub thresholds: Vec<ThresholdRow>,
    /// Regression budgets for `bench ab`.
    pub budgets: Vec<BudgetRow>,
    /// The conditions of the Rollback conditions section (`crate::thresholds::rollback`), each
    /// at its line.
    pub rollback: Vec<RollbackCondition>,
    /// The bench profile the record measured (`Measured scenario: profile `NAME`` in Context):
    /// its thresholds apply to runs of that profile. `None`: to every run.
    pub profile: Option<Located<String>>,
    /// The scenario the thresholds gate (`Scenario: `load.concurrency = 64`, ...` in the
    /// thresholds section): settings a run of the profile must have for them to apply as set.
    pub scenario: Vec<(ConfigKey, toml::Value)>,
    pub links: Vec<Link>,
    /// Template placeholders left in the text (outside code), reported by lint.
    pub placeholders: Vec<Located<String>>,
    /// Assets the record links (`assets/NNNN-x.svg`, relative to the record), with their lines.
    pub assets: Vec<Located<String>>,
    /// The line of a `> **SLO missed:**` flag (`adr new` writes it when the chosen run misses
    /// its SLO), and the reason a person gave on an `SLO exception:` line.
    pub slo_missed: Option<usize>,
    pub slo_exception: Option<Located<String>>,
    /// Problems met while parsing (bad status, date, decision lines, threshold rows, links).
    pub problems: Vec<Problem>,
}

impl Adr {
    /// The H1 text without an `ADR-NNNN:` prefix.
    pub fn title(&self) -> Option<&str> {
        let t = self.titles.first()?.value.as_str();
        Some(strip_adr_prefix(t).1)
    }

    pub fn section(&self, kind: SectionKind) -> Option<&Section> {
        self.sections.iter().find(|s| s.kind == Some(kind))
    }

    /// Why the status is unknown: the problem at the status line, or the missing-status problem.
    /// Empty when the status is valid.
    pub fn status_problems(&self) -> Vec<Problem> {
        if self.status.is_some() {
            return Vec::new();
        }
        match self.status_line {
            // Written but not valid: what parsing said about that line.
            Some(line) => self.problems.iter().filter(|p| p.line == line).cloned().collect(),
            // Not written: the missing-status problem parsing reports under the title.
            None => {
                let title_line = self.titles.first().map_or(1, |t| t.line);
                vec![Problem::new(&self.path, title_line, NO_STATUS)]
            }
        }
    }

    pub fn status_value(&self) -> Option<AdrStatus> {
        self.status.as_ref().map(|s| s.value)
    }

    /// `ADR-0007` (or the file name when the number is unknown).
    pub fn label(&self) -> String {
        match self.number {
            Some(n) => format!("ADR-{n:04}"),
            None => self.path.display().to_string(),
        }
    }
}

/// Split `ADR-0007: Title` into `(Some(7), "Title")`; other titles are returned whole.
pub fn strip_adr_prefix(title: &str) -> (Option<u32>, &str) {
    let t = title.trim();
    let upper = t.get(..4).map(|p| p.eq_ignore_ascii_case("adr-")).unwrap_or(false);
    if upper {
        let rest = &t[4..];
        let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 {
            let n = rest[..digits].parse().ok();
            // One separator (`ADR-7: T`, `ADR-7. T`, `ADR-7 - T`, `ADR-7 T`): a title's own
            // leading dots or dashes are its own.
            let after = &rest[digits..];
            let after = match after.strip_prefix([':', '.']) {
                Some(a) => a.trim_start(),
                None => {
                    let a = after.trim_start();
                    a.strip_prefix(['-', '\u{2013}', '\u{2014}'])
                        .filter(|r| r.starts_with(char::is_whitespace))
                        .unwrap_or(a)
                        .trim_start()
                }
            };
            return (n, after.trim_end());
        }
    }
    (None, t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_parse_case_insensitively_and_name_the_choices() {
        assert_eq!(AdrStatus::parse("accepted"), Ok(AdrStatus::Accepted));
        assert_eq!(AdrStatus::parse(" Proposed "), Ok(AdrStatus::Proposed));
        assert_eq!(AdrStatus::parse("Superseded by 0003"), Ok(AdrStatus::SupersededBy(3)));
        assert_eq!(
            AdrStatus::parse("Superseded by [ADR-0012](0012-x.md)"),
            Ok(AdrStatus::SupersededBy(12))
        );
        assert!(AdrStatus::parse("Superseded by").unwrap_err().to_string().contains("NNNN"));
        assert!(
            AdrStatus::parse("Acepted").unwrap_err().to_string().contains("Proposed, Accepted")
        );
        assert_eq!(AdrStatus::SupersededBy(3).to_string(), "Superseded by 0003");
    }

    #[test]
    fn section_headings_are_recognised_with_numbers_and_aliases() {
        assert_eq!(SectionKind::from_heading("1. Context"), Some(SectionKind::Context));
        assert_eq!(SectionKind::from_heading("Solidified rules"), Some(SectionKind::Decision));
        assert_eq!(
            SectionKind::from_heading("CI gate  thresholds:"),
            Some(SectionKind::Thresholds)
        );
        assert_eq!(SectionKind::from_heading("4. Rollback"), Some(SectionKind::Rollback));
        assert_eq!(SectionKind::from_heading("Appendix"), None);
    }

    #[test]
    fn adr_prefix_is_split_from_titles() {
        assert_eq!(strip_adr_prefix("ADR-0007: Chunked prefill"), (Some(7), "Chunked prefill"));
        assert_eq!(strip_adr_prefix("Use chunked prefill"), (None, "Use chunked prefill"));
        assert_eq!(strip_adr_prefix("ADR-0002: ../../x"), (Some(2), "../../x"));
        assert_eq!(strip_adr_prefix("ADR-0002: -x"), (Some(2), "-x"));
        assert_eq!(strip_adr_prefix("ADR-12. Title"), (Some(12), "Title"));
        assert_eq!(strip_adr_prefix("ADR-12 - Title"), (Some(12), "Title"));
        assert_eq!(strip_adr_prefix("ADR-12 Title"), (Some(12), "Title"));
    }
}
