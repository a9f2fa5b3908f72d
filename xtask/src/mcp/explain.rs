//! The `explain_record` tool: what a decision record fixes and why, read with the records'
//! own parser (`infergate_policy::adr::parse_adr`): its status and whether it is live, the reasons (its
//! Context and Decision sections), the governed parameters it fixes, the thresholds and
//! regression budgets it gates with, its rollback conditions and its links. Only a file inside
//! the repository is read: the path, symbolic links resolved, must stay under the repository root.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use infergate_policy::adr::live::is_live;
use infergate_policy::adr::model::{Adr, Decided, LinkKind, SectionKind};
use infergate_policy::adr::parse::number_from_file_name;
use infergate_policy::adr::records::read_records;
use infergate_policy::adr::{ADR_DIR, parse_adr};

/// The arguments of `explain_record`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExplainArgs {
    /// The record: its number (`7`, `0007`, `ADR-0007`) or its path relative to the repository
    /// root (`docs/adr/0007-enable-chunked-prefill.md`).
    pub record: String,
}

/// What a record fixes and why.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Explanation {
    /// The record's path, relative to the repository root.
    pub path: String,
    pub number: Option<u32>,
    pub title: Option<String>,
    /// `Proposed`, `Accepted`, `Superseded by ADR-NNNN`, ...
    pub status: Option<String>,
    pub date: Option<String>,
    pub deciders: Option<String>,
    /// Whether the record is in force: Accepted and not wholly superseded (its thresholds are
    /// in `thresholds/gate.toml`).
    pub live: bool,
    /// The bench profile its thresholds gate (none: every profile).
    pub profile: Option<String>,
    /// Why: the Context section's text.
    pub context: String,
    /// What was decided: the Decision section's text.
    pub decision: String,
    /// The governed parameters the record fixes.
    pub parameters: Vec<Parameter>,
    /// The CI gate thresholds.
    pub thresholds: Vec<ThresholdOut>,
    /// Regression budgets of the A/B gate (`bench ab`).
    pub budgets: Vec<BudgetOut>,
    /// The scenario the thresholds were set for (`load.concurrency = 64`).
    pub scenario: Vec<String>,
    /// When to roll the decision back.
    pub rollback_conditions: Vec<RollbackOut>,
    /// Supersession links (`Supersedes ADR-0001`, `Superseded by ADR-0009`).
    pub links: Vec<String>,
    /// What the parser could not read (lint reports the same).
    pub problems: Vec<String>,
}

/// One decision line: `configs/engine.toml: scheduler.max_num_seqs = 256`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Parameter {
    pub file: String,
    pub key: String,
    /// The value as TOML; absent when the record removes the key.
    pub value: Option<String>,
    pub removed: bool,
    pub line: usize,
}

/// One threshold row, its limit in the unit of the metric registry.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ThresholdOut {
    pub metric: String,
    pub comparator: String,
    pub limit: f64,
    pub unit: String,
    /// `block` fails the gate, `warn` reports.
    pub action: String,
    /// The load it is decided at, "holds the SLO at load L" (`concurrency 24`, `rate 2.5
    /// req/s`): the gate decides it on runs at that load only. Absent: every run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<String>,
    pub line: usize,
}

/// One regression budget: the candidate may be this much worse than the baseline.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BudgetOut {
    pub metric: String,
    pub worse_by: f64,
    pub action: String,
    pub line: usize,
}

/// One rollback condition as the record states it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RollbackOut {
    pub condition: String,
    pub metric: String,
    pub action: String,
    pub line: usize,
}

/// Why the record a call names cannot be explained.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The records directory cannot be read (the error with its causes).
    #[error("{0:#}")]
    Records(anyhow::Error),
    #[error("no record numbered {0} in {ADR_DIR}")]
    NoNumber(u32),
    /// Not a path inside the repository.
    #[error("`{0}` is not a record: give its number or its path relative to the repository root")]
    NotARecord(String),
    #[error("no record at {0}")]
    NoFile(String),
    /// The path leads out of the repository (a symbolic link on the way).
    #[error(
        "{} resolves to {}, outside the repository {}: only a record inside it is read",
        .path.display(), .target.display(), .root.display()
    )]
    Outside { path: PathBuf, target: PathBuf, root: PathBuf },
    #[error("cannot read {}: {error}", .path.display())]
    Unreadable { path: PathBuf, error: std::io::Error },
}

/// The record `which` names under `root` (a number or a path), parsed, with every record of
/// the directory (to tell whether it is live), or why it cannot be read.
pub fn explain(root: &Path, which: &str) -> Result<Explanation, ExplainError> {
    let records = read_records(root, Path::new(ADR_DIR)).map_err(ExplainError::Records)?;
    let path = resolve(root, which, &records)?;
    let file = inside(root, &path)?;
    let text = std::fs::read_to_string(&file)
        .map_err(|error| ExplainError::Unreadable { path: path.clone(), error })?;
    let adr = parse_adr(&path, &text);
    let all: Vec<Adr> = records.iter().map(|(p, t)| parse_adr(p, t)).collect();
    Ok(describe(&adr, &text, is_live(&adr, &all)))
}

/// A number names the record of the directory with that number; anything else is a path
/// inside the repository.
fn resolve(
    root: &Path,
    which: &str,
    records: &[(PathBuf, String)],
) -> Result<PathBuf, ExplainError> {
    let w = which.trim();
    let digits = w.trim_start_matches("ADR-").trim_start_matches("adr-");
    if let Ok(n) = digits.parse::<u32>() {
        return records
            .iter()
            .find(|(p, _)| number_from_file_name(p) == Some(n))
            .map(|(p, _)| p.clone())
            .ok_or(ExplainError::NoNumber(n));
    }
    let rel = Path::new(w);
    let inside =
        rel.is_relative() && rel.components().all(|c| matches!(c, std::path::Component::Normal(_)));
    if !inside {
        return Err(ExplainError::NotARecord(w.to_string()));
    }
    if !root.join(rel).is_file() {
        return Err(ExplainError::NoFile(w.to_string()));
    }
    Ok(rel.to_path_buf())
}

/// The file `path` (relative to `root`) names, every symbolic link resolved, when it is inside
/// the repository; what is read is that file, so a link changed in between is not followed.
fn inside(root: &Path, path: &Path) -> Result<PathBuf, ExplainError> {
    let unreadable = |error| ExplainError::Unreadable { path: path.to_path_buf(), error };
    let root = root.canonicalize().map_err(unreadable)?;
    let target = root.join(path).canonicalize().map_err(unreadable)?;
    if !target.starts_with(&root) {
        return Err(ExplainError::Outside { path: path.to_path_buf(), target, root });
    }
    Ok(target)
}

fn describe(adr: &Adr, text: &str, live: bool) -> Explanation {
    let section = |kind: SectionKind| section_text(adr, text, kind);
    Explanation {
        path: adr.path.to_string_lossy().replace('\\', "/"),
        number: adr.number,
        title: adr.titles.first().map(|t| t.value.clone()),
        status: adr.status.as_ref().map(|s| s.value.to_string()),
        date: adr.date.as_ref().map(|d| d.value.to_string()),
        deciders: adr.deciders.as_ref().map(|d| d.value.clone()),
        live,
        profile: adr.profile.as_ref().map(|p| p.value.clone()),
        context: section(SectionKind::Context),
        decision: section(SectionKind::Decision),
        parameters: adr.decisions.iter().map(parameter).collect(),
        thresholds: adr
            .thresholds
            .iter()
            .map(|t| ThresholdOut {
                metric: t.metric.to_string(),
                comparator: t.comparator.to_string(),
                limit: t.limit,
                unit: t.unit.clone(),
                action: t.action.to_string(),
                load: t.load.map(|l| l.to_string()),
                line: t.line,
            })
            .collect(),
        budgets: adr
            .budgets
            .iter()
            .map(|b| BudgetOut {
                metric: b.metric.to_string(),
                worse_by: b.worse_by,
                action: b.action.to_string(),
                line: b.line,
            })
            .collect(),
        scenario: adr.scenario.iter().map(|(k, v)| format!("{k} = {v}")).collect(),
        rollback_conditions: adr
            .rollback
            .iter()
            .map(|r| RollbackOut {
                condition: r.render(),
                metric: r.metric.to_string(),
                action: r.action.to_string(),
                line: r.line,
            })
            .collect(),
        links: adr.links.iter().map(link).collect(),
        problems: adr.problems.iter().map(|p| p.to_string()).collect(),
    }
}

fn parameter(d: &infergate_policy::adr::model::DecisionLine) -> Parameter {
    let (value, removed) = match &d.value {
        Decided::Set(v) => (Some(v.to_string()), false),
        Decided::Removed => (None, true),
    };
    Parameter { file: d.file.clone(), key: d.key.to_string(), value, removed, line: d.line }
}

fn link(l: &infergate_policy::adr::model::Link) -> String {
    let n = format!("ADR-{:04}", l.number);
    match l.kind {
        LinkKind::Supersedes => format!("Supersedes {n}"),
        LinkKind::SupersededBy => format!("Superseded by {n}"),
        LinkKind::SupersedesInPart => {
            let parts: Vec<String> = l.parts.iter().map(|p| p.to_string()).collect();
            format!("Supersedes in part {n}: {}", parts.join(", "))
        }
    }
}

/// The body of the first section of `kind`, trimmed (empty when the record has none).
fn section_text(adr: &Adr, text: &str, kind: SectionKind) -> String {
    let Some(s) = adr.sections.iter().find(|s| s.kind == Some(kind)) else {
        return String::new();
    };
    let lines: Vec<&str> = text.lines().collect();
    let body = lines.get(s.line..s.end.saturating_sub(1).min(lines.len())).unwrap_or_default();
    body.join("\n").trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: &str = "# ADR-0003: Enable chunked prefill\n\n- Status: Accepted\n- Date: 2025-05-01\n- Deciders: Platform team\n\n\
        ## Context\n\nLong prompts block decode at concurrency 64.\n\n\
        ## Decision\n\n- configs/engine.toml: scheduler.enable_chunked_prefill = true\n- configs/engine.toml: scheduler.max_num_batched_tokens removed\n\n\
        ## CI gate thresholds\n\n| Metric | Comparator | Limit | Unit | Action |\n|---|---|---|---|---|\n\
        | `metrics.ttft_ms.p99` | <= | 302 | ms | block |\n\n\
        ## Rollback conditions\n\n- `metrics.ttft_ms.p99` > 302 ms for 5m: roll back\n\n\
        ## Consequences\n\nReviews read numbers.\n\n## Links\n\nNone.\n";

    #[test]
    fn a_record_is_explained_by_number_and_by_path() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join(ADR_DIR)).unwrap();
        std::fs::write(t.path().join(ADR_DIR).join("0003-enable-chunked-prefill.md"), RECORD)
            .unwrap();
        let e = explain(t.path(), "ADR-0003").unwrap();
        assert_eq!(e.path, "docs/adr/0003-enable-chunked-prefill.md");
        assert_eq!(e.title.as_deref(), Some("ADR-0003: Enable chunked prefill"));
        assert_eq!(e.status.as_deref(), Some("Accepted"));
        assert!(e.live);
        assert_eq!(e.context, "Long prompts block decode at concurrency 64.");
        assert!(e.decision.starts_with("- configs/engine.toml: scheduler.enable_chunked_prefill"));
        assert_eq!(e.parameters.len(), 2);
        assert_eq!(e.parameters[0].value.as_deref(), Some("true"));
        assert!(e.parameters[1].removed && e.parameters[1].value.is_none());
        assert_eq!(e.thresholds[0].metric, "metrics.ttft_ms.p99");
        assert_eq!((e.thresholds[0].limit, e.thresholds[0].action.as_str()), (302.0, "block"));
        assert_eq!(e.rollback_conditions.len(), 1, "{:?}", e.problems);
        let by_path = explain(t.path(), "docs/adr/0003-enable-chunked-prefill.md").unwrap();
        assert_eq!(by_path.path, e.path);
        assert!(explain(t.path(), "9").unwrap_err().to_string().contains("no record numbered 9"));
        assert!(
            explain(t.path(), "../outside.md").unwrap_err().to_string().contains("is not a record")
        );
        assert!(
            explain(t.path(), "/etc/passwd").unwrap_err().to_string().contains("is not a record")
        );
        assert!(
            explain(t.path(), "docs/adr/none.md").unwrap_err().to_string().contains("no record at")
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_out_of_the_repository_is_refused_naming_it() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.md");
        std::fs::write(&secret, RECORD).unwrap();
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join(ADR_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("0003-enable-chunked-prefill.md"), RECORD).unwrap();
        std::os::unix::fs::symlink(&secret, dir.join("0004-elsewhere.md")).unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("docs/out")).unwrap();
        // A link that stays inside is read.
        std::os::unix::fs::symlink("0003-enable-chunked-prefill.md", dir.join("0005-same.md"))
            .unwrap();
        // The records by number are the directory's files, links left out.
        let by_number = explain(t.path(), "4").unwrap_err().to_string();
        assert_eq!(by_number, "no record numbered 4 in docs/adr");
        for which in ["docs/adr/0004-elsewhere.md", "docs/out/secret.md"] {
            let e = explain(t.path(), which).unwrap_err();
            assert!(matches!(e, ExplainError::Outside { .. }), "{which}: {e}");
            let why = e.to_string();
            assert!(why.contains("outside the repository"), "{why}");
            assert!(why.contains(&secret.canonicalize().unwrap().display().to_string()), "{why}");
        }
        let e = explain(t.path(), "docs/adr/0004-elsewhere.md").unwrap_err().to_string();
        assert!(e.starts_with("docs/adr/0004-elsewhere.md resolves to "), "{e}");
        assert_eq!(
            explain(t.path(), "docs/adr/0005-same.md").unwrap().title,
            explain(t.path(), "3").unwrap().title
        );
    }
}
