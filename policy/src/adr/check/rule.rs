//! The rule of `adr check`, a pure function over typed inputs ([`evaluate`]):
//!
//! 1. every governed key that changed between the merge base and head is named, with its new
//!    value (or `removed`), by a decision line of a record the diff **adds** (not edits) with
//!    status Proposed or Accepted; several added records may share the keys;
//! 2. the records at head pass `adr lint`;
//! 3. `thresholds/gate.toml` at head is what the records at head generate;
//! 4. a record that was Accepted at the merge base is not edited except its status (with its
//!    date) and its Links section, nor deleted, nor renumbered.
//!
//! An `ADR-Exempt: <reason>` trailer in a commit of the pull request waives rule 1 for the
//! governed keys that commit itself changes, and only for them: a key changed by another commit,
//! a record edit, a lint problem or a stale gate.toml still fails. What it waives is reported.

use std::path::PathBuf;

use super::semdiff::{KeyChange, same_value};
use crate::adr::live::SyncState;
use crate::adr::model::{Adr, AdrStatus, Decided, DecisionLine, Problem, SectionKind};
use crate::adr::parse::parse_adr;
use crate::adr::records::decision_lines;

/// A record file as it is at one side of the diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordFile {
    /// Relative to the repository root (`docs/adr/0002-x.md`).
    pub path: PathBuf,
    pub text: String,
}

impl RecordFile {
    pub fn new(path: impl Into<PathBuf>, text: impl Into<String>) -> RecordFile {
        RecordFile { path: path.into(), text: text.into() }
    }
}

/// A record file the diff touches: added (`old` is `None`), deleted (`new` is `None`), or
/// modified or renamed (both).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordChange {
    pub old: Option<RecordFile>,
    pub new: Option<RecordFile>,
}

impl RecordChange {
    pub fn added(path: impl Into<PathBuf>, text: impl Into<String>) -> RecordChange {
        RecordChange { old: None, new: Some(RecordFile::new(path, text)) }
    }
    pub fn modified(path: impl Into<PathBuf> + Clone, old: &str, new: &str) -> RecordChange {
        RecordChange {
            old: Some(RecordFile::new(path.clone(), old)),
            new: Some(RecordFile::new(path, new)),
        }
    }
    pub fn deleted(path: impl Into<PathBuf>, text: impl Into<String>) -> RecordChange {
        RecordChange { old: Some(RecordFile::new(path, text)), new: None }
    }
    pub fn is_added(&self) -> bool {
        self.old.is_none() && self.new.is_some()
    }
}

/// A file of the records' assets directory (`docs/adr/assets/NNNN-x.svg`) the diff touches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssetChange {
    /// Relative to the repository root: the head path, or the base path of a deleted file.
    pub path: PathBuf,
    /// `added`, `modified`, `deleted` or `renamed from OLD`.
    pub how: String,
}

/// Assets are part of their record (the `NNNN` their name starts with): the assets of a record
/// that was Accepted at the merge base are not added, edited, renamed or deleted, as the
/// record itself is not (rule 4). `base` is the records at the merge base.
pub fn asset_edits(assets: &[AssetChange], base: &[Adr]) -> Vec<Violation> {
    let mut out = Vec::new();
    for a in assets {
        let name = a.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let Some(number) = name.get(..4).and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Some(adr) = base
            .iter()
            .find(|r| r.number == Some(number) && r.status_value() == Some(AdrStatus::Accepted))
        else {
            continue;
        };
        out.push(Violation::AcceptedEdited(Problem::new(
            &a.path,
            1,
            format!(
                "an asset of {} ({}), which was Accepted at the merge base, was {}; its charts \
                 are part of the record and stay as accepted: supersede it with a new record \
                 and new assets",
                adr.label(),
                adr.path.display(),
                a.how
            ),
        )));
    }
    out
}

/// A workload file (trace, dataset, conversations, a length or think-time file) of a gated
/// bench profile that is not what it was at the merge base: the profile's runs measure another
/// scenario than the records' thresholds were set for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioChange {
    /// The bench profile.
    pub profile: String,
    /// The workload key that names the file (`workload.conversations`).
    pub key: infergate_model::config::ConfigKey,
    /// The file at head (or at the merge base, when the key is no longer set).
    pub file: String,
    /// `modified`, `newly set`, `no longer set` or `now names X (was Y)`.
    pub how: String,
}

/// The profiles live thresholds gate: those they name, or every profile when one names none.
pub fn gated_profiles(threshold_profiles: &[Option<String>], profiles: &[String]) -> Vec<String> {
    if threshold_profiles.iter().any(Option::is_none) {
        return profiles.to_vec();
    }
    let mut out: Vec<String> = threshold_profiles.iter().flatten().cloned().collect();
    out.sort();
    out.dedup();
    out
}

/// A changed workload file of a gated profile is a changed scenario: like a changed engine
/// parameter it needs a record the diff adds, Proposed or Accepted, that measured that profile
/// (its `Measured scenario: profile` is the profile); each change no such record covers is a
/// violation at the file.
pub fn scenario_edits(changes: &[ScenarioChange], records: &[RecordChange]) -> Vec<Violation> {
    let measured: Vec<String> = records
        .iter()
        .filter(|rc| rc.is_added())
        .filter_map(|rc| rc.new.as_ref())
        .filter_map(|f| {
            let adr = parse_adr(&f.path, &f.text);
            let live =
                matches!(adr.status_value(), Some(AdrStatus::Proposed | AdrStatus::Accepted));
            adr.profile.filter(|_| live).map(|p| p.value)
        })
        .collect();
    changes
        .iter()
        .filter(|c| !measured.contains(&c.profile))
        .map(|c| {
            Violation::ScenarioChanged(Problem::new(
                &c.file,
                1,
                format!(
                    "{} of gated profile `{}` ({}) {}: the profile's runs are another scenario \
                     than its thresholds were set for; add a decision record measured on \
                     profile `{}` (Proposed or Accepted)",
                    c.file, c.profile, c.key, c.how, c.profile
                ),
            ))
        })
        .collect()
}

/// A refreshed dataset that no gated profile reads (the acceptance dataset of `cargo xtask
/// accept`, which `dataset refresh` keeps fresh) still changes what the runs on it measure: it
/// needs a record the diff adds, Proposed or Accepted, that cites it (`adr new` lists a
/// refreshed dataset of its runs under Reproduction). `how` says what changed and the refresh.
pub fn refreshed_edits(refreshed: &[(String, String)], records: &[RecordChange]) -> Vec<Violation> {
    let citing: Vec<&str> = records
        .iter()
        .filter(|rc| rc.is_added())
        .filter_map(|rc| rc.new.as_ref())
        .filter(|f| {
            let status = parse_adr(&f.path, &f.text).status_value();
            matches!(status, Some(AdrStatus::Proposed | AdrStatus::Accepted))
        })
        .map(|f| f.text.as_str())
        .collect();
    refreshed
        .iter()
        .filter(|(file, _)| !citing.iter().any(|text| text.contains(file.as_str())))
        .map(|(file, how)| {
            Violation::ScenarioChanged(Problem::new(
                file,
                1,
                format!(
                    "{file} {how}: the runs on it are another scenario than those the records \
                     measured; add a decision record that cites it (Proposed or Accepted; `adr \
                     new` from runs on the refreshed dataset lists it under Reproduction)"
                ),
            ))
        })
        .collect()
}

/// An `ADR-Exempt: <reason>` trailer found in a commit of the pull request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exemption {
    /// Commit id (abbreviated as the caller likes).
    pub commit: String,
    /// First line of the commit message.
    pub summary: String,
    pub reason: String,
    /// The governed keys (`file`, `key`) this commit changes against its first parent: the only
    /// keys the trailer waives.
    pub keys: Vec<(String, String)>,
}

/// Everything the rule looks at.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    /// The semantic diff of the governed files.
    pub changes: &'a [KeyChange],
    /// Record files the diff adds, modifies, renames or deletes.
    pub records: &'a [RecordChange],
    /// `adr lint` over the records at head.
    pub lint: &'a [Problem],
    /// `thresholds/gate.toml` at head against the records at head.
    pub thresholds: &'a Result<SyncState, Vec<Problem>>,
    /// Where gate.toml is, for messages.
    pub gate_file: &'a str,
    /// `ADR-Exempt` trailers of the pull request's commits.
    pub exemptions: &'a [Exemption],
}

/// A decision line of a record that names a changed key.
#[derive(Clone, Debug, PartialEq)]
pub struct Naming {
    /// `ADR-0002` (or the file name when it has no number).
    pub label: String,
    pub path: PathBuf,
    pub line: usize,
    /// What the line says.
    pub value: Decided,
}

/// How one changed key is covered.
#[derive(Clone, Debug, PartialEq)]
pub struct Coverage {
    pub change: KeyChange,
    /// Added Proposed/Accepted records whose decision line names the key with its new value.
    pub covered_by: Vec<Naming>,
    /// Why other records that name the key do not cover it (`ADR-0003 says 512`).
    pub near_misses: Vec<String>,
    /// The exempt commit that changed this key, when no record covers it: waived, reported.
    pub exempted_by: Option<String>,
}

impl Coverage {
    pub fn covered(&self) -> bool {
        !self.covered_by.is_empty()
    }
}

/// What breaks the rule besides an uncovered key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// `adr lint` finds a problem in the records at head.
    Lint(Problem),
    /// gate.toml is missing, out of date, or cannot be generated (a record problem).
    Thresholds(String),
    /// A record that was Accepted at the merge base was edited, deleted or renumbered.
    AcceptedEdited(Problem),
    /// A workload file of a gated profile changed, and no added record measured that profile.
    ScenarioChanged(Problem),
    /// A record the pull request adds decides a key (or sets a metric) otherwise than a live
    /// record it does not supersede: `adr accept` would refuse it, so the change it covers
    /// contradicts a decision in force.
    LiveContradicted(Problem),
    /// A generated file at head (the alert rules) is not what the records at head generate.
    Stale(String),
    /// Two governed sources of one deployment give a key different values at head.
    Drift(Problem),
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::Lint(p) => write!(f, "{p}"),
            Violation::Thresholds(m) => f.write_str(m),
            Violation::AcceptedEdited(p) | Violation::ScenarioChanged(p) | Violation::Drift(p) => {
                write!(f, "{p}")
            }
            Violation::LiveContradicted(p) => write!(
                f,
                "{p}: the live record's decision is in force until a record of this pull request \
                 supersedes it"
            ),
            Violation::Stale(m) => f.write_str(m),
        }
    }
}

/// The rule's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// One entry per changed governed key, in the order of the changes.
    pub coverage: Vec<Coverage>,
    pub violations: Vec<Violation>,
    /// The records the diff adds, valid for coverage or not: `(label, path, status)`.
    pub added: Vec<(String, PathBuf, Option<AdrStatus>)>,
    pub exemptions: Vec<Exemption>,
}

impl Outcome {
    /// Changed keys no added record covers.
    pub fn uncovered(&self) -> impl Iterator<Item = &Coverage> {
        self.coverage.iter().filter(|c| !c.covered())
    }

    /// Whether the rule holds (exemptions aside).
    pub fn rule_holds(&self) -> bool {
        self.violations.is_empty() && self.uncovered().next().is_none()
    }

    /// Whether the check passes: no violation, and each changed key is covered by a record or
    /// was changed by a commit with an `ADR-Exempt` trailer.
    pub fn passed(&self) -> bool {
        self.violations.is_empty() && self.uncovered().all(|c| c.exempted_by.is_some())
    }

    /// Keys waived by an exemption (uncovered, changed by an exempt commit).
    pub fn waived(&self) -> impl Iterator<Item = &Coverage> {
        self.uncovered().filter(|c| c.exempted_by.is_some())
    }

    pub fn status(&self) -> crate::exit::Status {
        crate::exit::Status::from_ok(self.passed())
    }
}

/// What accepting every Proposed record the pull request adds would contradict: the
/// decisions of governed keys that conflict with a live record's (those `adr accept` refuses)
/// and that the added records bring, each at its line. `added` are the added records' paths.
pub fn live_contradictions(adrs: &[Adr], added: &[PathBuf]) -> Vec<Violation> {
    let all = crate::adr::live::decision_conflicts;
    let before = all(adrs);
    let mut accepted = adrs.to_vec();
    for a in accepted.iter_mut().filter(|a| added.contains(&a.path)) {
        if let Some(st) = &mut a.status
            && st.value == AdrStatus::Proposed
        {
            st.value = AdrStatus::Accepted;
        }
    }
    all(&accepted)
        .into_iter()
        .filter(|p| !before.contains(p))
        .map(Violation::LiveContradicted)
        .collect()
}

/// Apply the rule.
pub fn evaluate(input: Input<'_>) -> Outcome {
    // Records the diff adds, and what each says.
    let mut added = Vec::new();
    let mut coverers: Vec<(String, PathBuf, Vec<DecisionLine>)> = Vec::new();
    let mut others: Vec<(String, String, Vec<DecisionLine>)> = Vec::new();
    for rc in input.records {
        let Some(new) = &rc.new else { continue };
        let adr = parse_adr(&new.path, &new.text);
        let label = adr.label();
        let set = decision_lines(&new.path, &new.text);
        let status = set.as_ref().ok().map(|s| s.status);
        if rc.is_added() {
            added.push((label.clone(), new.path.clone(), status));
        }
        let Ok(set) = set else {
            // Its problems are lint's: reported there.
            continue;
        };
        let counts = matches!(set.status, AdrStatus::Proposed | AdrStatus::Accepted);
        if rc.is_added() && counts {
            coverers.push((label, new.path.clone(), set.lines));
        } else {
            let why = if rc.is_added() {
                format!("{label} is {}", set.status)
            } else {
                format!("{label} was edited, not added")
            };
            others.push((label, why, set.lines));
        }
    }

    let coverage = input
        .changes
        .iter()
        .map(|change| {
            let mut covered_by = Vec::new();
            let mut near_misses = Vec::new();
            let names = |d: &&DecisionLine| d.file == change.file && d.key.as_str() == change.key;
            for (label, path, lines) in &coverers {
                for d in lines.iter().filter(names) {
                    if says_new_value(&d.value, change) {
                        covered_by.push(Naming {
                            label: label.clone(),
                            path: path.clone(),
                            line: d.line,
                            value: d.value.clone(),
                        });
                    } else {
                        near_misses.push(format!("{label} says {}", decided_text(&d.value)));
                    }
                }
            }
            for (_, why, lines) in &others {
                if lines.iter().any(|d| names(&d)) {
                    near_misses.push(why.clone());
                }
            }
            let exempted_by = if covered_by.is_empty() {
                input
                    .exemptions
                    .iter()
                    .find(|e| e.keys.iter().any(|(f, k)| *f == change.file && *k == change.key))
                    .map(|e| e.commit.clone())
            } else {
                None
            };
            Coverage { change: change.clone(), covered_by, near_misses, exempted_by }
        })
        .collect();

    let mut violations: Vec<Violation> = input.lint.iter().cloned().map(Violation::Lint).collect();
    match input.thresholds {
        Ok(SyncState::UpToDate) => {}
        Ok(SyncState::Missing { .. }) => violations.push(Violation::Thresholds(format!(
            "{} does not exist at head; run `cargo xtask adr thresholds` and commit it",
            input.gate_file
        ))),
        Ok(SyncState::OutOfDate { .. }) => violations.push(Violation::Thresholds(format!(
            "{} is out of date with the records at head; run `cargo xtask adr thresholds` and \
             commit it",
            input.gate_file
        ))),
        Err(problems) => {
            for p in problems.iter().filter(|p| !input.lint.contains(p)) {
                violations.push(Violation::Thresholds(format!(
                    "{p} ({} cannot be generated)",
                    input.gate_file
                )));
            }
        }
    }
    for rc in input.records {
        if let Some(p) = accepted_edit(rc) {
            violations.push(Violation::AcceptedEdited(p));
        }
    }

    Outcome { coverage, violations, added, exemptions: input.exemptions.to_vec() }
}

fn says_new_value(value: &Decided, change: &KeyChange) -> bool {
    match (value, &change.new) {
        (Decided::Set(v), Some(new)) => same_value(v, new),
        (Decided::Removed, None) => true,
        _ => false,
    }
}

fn decided_text(d: &Decided) -> String {
    match d {
        Decided::Set(v) => super::semdiff::inline(v),
        Decided::Removed => "removed".into(),
    }
}

/// The edit of a record that was Accepted at the merge base, if it is more than its status,
/// date and links.
fn accepted_edit(rc: &RecordChange) -> Option<Problem> {
    let old = rc.old.as_ref()?;
    let before = parse_adr(&old.path, &old.text);
    if before.status_value() != Some(AdrStatus::Accepted) {
        return None;
    }
    let label = before.label();
    let Some(new) = &rc.new else {
        return Some(Problem::new(
            &old.path,
            1,
            format!(
                "{label} is Accepted and was deleted; an accepted record stays: supersede it \
                 (`cargo xtask adr supersede {n} NEW`) or set its status to Deprecated",
                n = before.number.map_or("N".into(), |n| n.to_string())
            ),
        ));
    };
    let after = parse_adr(&new.path, &new.text);
    if after.number != before.number {
        return Some(Problem::new(
            &new.path,
            1,
            format!(
                "{label} is Accepted and was renumbered to {}; an accepted record keeps its number",
                new.path.display()
            ),
        ));
    }
    if let Some(status) = after.status.as_ref()
        && !matches!(
            status.value,
            AdrStatus::Accepted | AdrStatus::Deprecated | AdrStatus::SupersededBy(_)
        )
    {
        return Some(Problem::new(
            &new.path,
            status.line,
            format!(
                "{label} was Accepted at the merge base and is now {}; an accepted record does \
                 not go back: its status may only become `Superseded by NNNN` (`cargo xtask adr \
                 supersede {n} NEW`) or `Deprecated`",
                status.value,
                n = before.number.map_or("N".into(), |n| n.to_string())
            ),
        ));
    }
    let a = frozen_lines(&before, &old.text);
    let b = frozen_lines(&after, &new.text);
    let first_diff =
        (0..a.len().max(b.len())).find(|&i| a.get(i).map(|l| l.1) != b.get(i).map(|l| l.1))?;
    let line = b.get(first_diff).or(b.last()).map_or(1, |l| l.0);
    Some(Problem::new(
        &new.path,
        line,
        format!(
            "{label} is Accepted: only its status (with its date) and its Links may change, but \
             this line differs from the merge base; write a new record that supersedes it instead"
        ),
    ))
}

/// The lines of a record that may not change once it is Accepted, with their line numbers:
/// everything but the status and date lines and the body of the Links section.
fn frozen_lines<'t>(adr: &Adr, text: &'t str) -> Vec<(usize, &'t str)> {
    let links = adr.section(SectionKind::Links).map(|s| (s.line, s.end));
    let status = adr.status_line;
    let date = adr.date.as_ref().map(|d| d.line);
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r')))
        .filter(|&(n, _)| Some(n) != status && Some(n) != date)
        .filter(|&(n, _)| !links.is_some_and(|(start, end)| n > start && n < end))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adr::check::semdiff::diff_texts;

    const ENGINE: &str = "[scheduler]\nmax_num_seqs = 256\nenable_chunked_prefill = false\n";

    /// A lint-clean record with these decision lines.
    fn record(n: u32, status: &str, decisions: &str) -> String {
        format!(
            "# ADR-{n:04}: Tune the scheduler\n\n- Status: {status}\n- Date: 2025-05-01\n- Deciders: Platform team\n\n\
             ## Context\n\nLong prompts block decode.\n\n\
             ## Metrics matrix\n\n| Config | TTFT P99 (ms) |\n|---|---|\n| Baseline | 420 |\n\n\
             ## Decision\n\n{decisions}\n\n\
             ## CI gate thresholds\n\n| Metric | Comparator | Limit | Unit | Action |\n|---|---|---|---|---|\n\
             | `metrics.ttft_ms.p99` | <= | 200 | ms | block |\n\n\
             ## Rollback conditions\n\nTTFT P99 above 200 ms.\n\n\
             ## Consequences\n\nShorter waits.\n\n\
             ## Links\n\nNone.\n"
        )
    }

    fn path(n: u32) -> String {
        format!("docs/adr/{n:04}-tune-the-scheduler.md")
    }

    fn changes(new: &str) -> Vec<KeyChange> {
        diff_texts("configs/engine.toml", Some(ENGINE), Some(new)).unwrap()
    }

    const IN_SYNC: Result<SyncState, Vec<Problem>> = Ok(SyncState::UpToDate);

    fn run(changes: &[KeyChange], records: &[RecordChange]) -> Outcome {
        evaluate(Input {
            changes,
            records,
            lint: &[],
            thresholds: &IN_SYNC,
            gate_file: "thresholds/gate.toml",
            exemptions: &[],
        })
    }

    fn table(o: &Outcome) -> Vec<(String, Vec<String>, Vec<String>)> {
        o.coverage
            .iter()
            .map(|c| {
                (
                    c.change.to_string(),
                    c.covered_by.iter().map(|n| format!("{}:{}", n.label, n.line)).collect(),
                    c.near_misses.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn nothing_changed_passes() {
        let o = run(&changes(ENGINE), &[]);
        assert!(o.coverage.is_empty() && o.passed());
    }

    #[test]
    fn a_change_without_a_record_fails() {
        let c = changes(&ENGINE.replace("256", "384"));
        let o = run(&c, &[]);
        assert!(!o.passed());
        assert_eq!(
            table(&o),
            vec![("configs/engine.toml: scheduler.max_num_seqs 256 -> 384".into(), vec![], vec![])]
        );
    }

    #[test]
    fn an_added_record_naming_every_key_with_its_new_value_passes() {
        let new = "[scheduler]\nmax_num_seqs = 384\nmax_num_batched_tokens = 2048\n";
        let c = changes(new);
        let text = record(
            2,
            "Proposed",
            "- configs/engine.toml: scheduler.max_num_seqs = 384\n\
             - configs/engine.toml: scheduler.max_num_batched_tokens = 2048\n\
             - configs/engine.toml: scheduler.enable_chunked_prefill removed",
        );
        let o = run(&c, &[RecordChange::added(path(2), &text)]);
        assert!(o.passed(), "{o:#?}");
        assert_eq!(
            o.coverage.iter().map(|c| c.covered_by[0].line).collect::<Vec<_>>(),
            vec![21, 20, 19]
        );
        // Accepted counts too; so do two added records sharing the keys.
        let a = record(2, "Accepted", "- configs/engine.toml: scheduler.max_num_seqs = 384");
        let b = record(
            3,
            "Proposed",
            "- configs/engine.toml: scheduler.max_num_batched_tokens = 2048\n\
             - configs/engine.toml: scheduler.enable_chunked_prefill removed",
        );
        let o = run(&c, &[RecordChange::added(path(2), &a), RecordChange::added(path(3), &b)]);
        assert!(o.passed(), "{o:#?}");
    }

    #[test]
    fn a_record_missing_one_key_or_with_another_value_fails_naming_the_key() {
        let c = changes(&ENGINE.replace("256", "384").replace("false", "true"));
        let text = record(2, "Proposed", "- configs/engine.toml: scheduler.max_num_seqs = 384");
        let o = run(&c, &[RecordChange::added(path(2), &text)]);
        assert!(!o.passed());
        let missing: Vec<String> = o.uncovered().map(|c| c.change.target()).collect();
        assert_eq!(missing, vec!["configs/engine.toml: scheduler.enable_chunked_prefill"]);

        let text = record(
            2,
            "Proposed",
            "- configs/engine.toml: scheduler.max_num_seqs = 512\n\
             - configs/engine.toml: scheduler.enable_chunked_prefill = true",
        );
        let o = run(&c, &[RecordChange::added(path(2), &text)]);
        assert_eq!(table(&o)[1].2, vec!["ADR-0002 says 512".to_string()]);
        assert!(!o.passed());
        // Another file's key of the same name does not count.
        let text = record(
            2,
            "Proposed",
            "- configs/engine-tuned.toml: scheduler.max_num_seqs = 384\n\
             - configs/engine.toml: scheduler.enable_chunked_prefill = true",
        );
        let o = run(&c, &[RecordChange::added(path(2), &text)]);
        assert!(!o.passed());
    }

    #[test]
    fn edited_rejected_or_broken_records_do_not_cover() {
        let c = changes(&ENGINE.replace("256", "384"));
        let line = "- configs/engine.toml: scheduler.max_num_seqs = 384";
        let edited = RecordChange::modified(
            path(2),
            &record(2, "Proposed", "- configs/engine.toml: scheduler.max_num_seqs = 256"),
            &record(2, "Proposed", line),
        );
        let o = run(&c, &[edited]);
        assert_eq!(table(&o)[0].2, vec!["ADR-0002 was edited, not added".to_string()]);
        assert!(!o.passed());
        let o = run(&c, &[RecordChange::added(path(3), record(3, "Rejected", line))]);
        assert_eq!(table(&o)[0].2, vec!["ADR-0003 is Rejected".to_string()]);
        assert!(!o.passed());
        let o = run(&c, &[RecordChange::added(path(3), record(3, "Maybe", line))]);
        assert_eq!(o.added[0].2, None);
        assert!(!o.passed());
    }

    #[test]
    fn a_removed_key_is_covered_by_a_removal_line_only() {
        let c = changes("[scheduler]\nmax_num_seqs = 256\n");
        let set = record(
            2,
            "Proposed",
            "- configs/engine.toml: scheduler.enable_chunked_prefill = false",
        );
        assert!(!run(&c, &[RecordChange::added(path(2), set)]).passed());
        let removed = record(
            2,
            "Proposed",
            "- configs/engine.toml: scheduler.enable_chunked_prefill removed",
        );
        assert!(run(&c, &[RecordChange::added(path(2), removed)]).passed());
    }

    #[test]
    fn an_accepted_record_may_change_only_its_status_date_and_links() {
        let old = record(1, "Accepted", "- configs/engine.toml: scheduler.max_num_seqs = 256");
        let superseded = old
            .replace("- Status: Accepted", "- Status: Superseded by 0002")
            .replace("- Date: 2025-05-01", "- Date: 2025-06-01")
            .replace(
                "## Links\n\nNone.\n",
                "## Links\n\n- Superseded by [ADR-0002](0002-x.md)\n- and a note\n",
            );
        let o = run(&[], &[RecordChange::modified(path(1), &old, &superseded)]);
        assert!(o.passed(), "{o:#?}");

        let edited = old.replace("Long prompts block decode.", "Long prompts block decode badly.");
        let o = run(&[], &[RecordChange::modified(path(1), &old, &edited)]);
        assert!(!o.passed());
        let Violation::AcceptedEdited(p) = &o.violations[0] else { panic!("{o:#?}") };
        assert_eq!((p.line, p.path.to_str().unwrap()), (9, path(1).as_str()), "{p}");
        assert!(p.message.contains("ADR-0001 is Accepted"), "{p}");

        let o = run(&[], &[RecordChange::deleted(path(1), &old)]);
        assert!(
            matches!(&o.violations[0], Violation::AcceptedEdited(p) if p.message.contains("was deleted"))
        );
        let renumbered = RecordChange {
            old: Some(RecordFile::new(path(1), &old)),
            new: Some(RecordFile::new(path(7), old.replace("ADR-0001", "ADR-0007"))),
        };
        let o = run(&[], &[renumbered]);
        assert!(
            matches!(&o.violations[0], Violation::AcceptedEdited(p) if p.message.contains("renumbered"))
        );
        // An accepted record does not go back to Proposed (which would take its thresholds out
        // of gate.toml unnoticed) nor become Rejected; Deprecated is a way out.
        for back in ["Proposed", "Rejected"] {
            let text = old.replace("- Status: Accepted", &format!("- Status: {back}"));
            let o = run(&[], &[RecordChange::modified(path(1), &old, &text)]);
            let Violation::AcceptedEdited(p) = &o.violations[0] else { panic!("{o:#?}") };
            assert_eq!(p.line, 3, "{p}");
            assert!(
                p.message.contains(&format!("is now {back}; an accepted record does not go back")),
                "{p}"
            );
        }
        let deprecated = old.replace("- Status: Accepted", "- Status: Deprecated");
        assert!(run(&[], &[RecordChange::modified(path(1), &old, &deprecated)]).passed());
        // A Proposed record may be edited freely.
        let proposed = record(1, "Proposed", "- configs/engine.toml: scheduler.max_num_seqs = 256");
        let o = run(
            &[],
            &[RecordChange::modified(path(1), &proposed, &proposed.replace("Long", "Very long"))],
        );
        assert!(o.passed());
    }

    #[test]
    fn lint_problems_and_stale_thresholds_fail() {
        let lint = vec![Problem::new("docs/adr/0002-x.md", 3, "unknown status `Maybe`")];
        let missing = Ok(SyncState::Missing { expected: String::new() });
        let stale = Ok(SyncState::OutOfDate { expected: String::new() });
        let broken =
            Err(vec![lint[0].clone(), Problem::new("docs/adr/0003-y.md", 9, "metric twice")]);
        let input = |lint, thresholds| Input {
            changes: &[],
            records: &[],
            lint,
            thresholds,
            gate_file: "thresholds/gate.toml",
            exemptions: &[],
        };
        let o = evaluate(input(&lint, &IN_SYNC));
        assert_eq!(o.violations, vec![Violation::Lint(lint[0].clone())]);
        for (state, fragment) in [(&missing, "does not exist"), (&stale, "out of date")] {
            let o = evaluate(input(&[], state));
            assert!(!o.passed());
            assert!(o.violations[0].to_string().contains(fragment), "{:?}", o.violations);
        }
        // Problems lint already reports are not repeated.
        let o = evaluate(input(&lint, &broken));
        let got: Vec<String> = o.violations.iter().map(|v| v.to_string()).collect();
        assert_eq!(
            got,
            vec![
                "docs/adr/0002-x.md:3: unknown status `Maybe`",
                "docs/adr/0003-y.md:9: metric twice (thresholds/gate.toml cannot be generated)",
            ]
        );
    }

    #[test]
    fn an_exemption_waives_only_the_keys_its_commit_changed() {
        let c = changes(&ENGINE.replace("256", "384").replace("false", "true"));
        let key = |k: &str| ("configs/engine.toml".to_string(), k.to_string());
        let ex = [Exemption {
            commit: "abc1234".into(),
            summary: "Hotfix".into(),
            reason: "incident 42".into(),
            keys: vec![key("scheduler.max_num_seqs")],
        }];
        let input = |changes, lint, thresholds| Input {
            changes,
            records: &[],
            lint,
            thresholds,
            gate_file: "thresholds/gate.toml",
            exemptions: &ex,
        };
        // Two keys changed, the exempt commit changed one: the other still fails.
        let o = evaluate(input(&c, &[], &IN_SYNC));
        assert!(!o.passed() && !o.rule_holds());
        let waived: Vec<String> = o.waived().map(|c| c.change.key.clone()).collect();
        assert_eq!(waived, ["scheduler.max_num_seqs"]);
        // Only that key changed: waived, passes, the rule itself does not hold.
        let one = changes(&ENGINE.replace("256", "384"));
        let o = evaluate(input(&one, &[], &IN_SYNC));
        assert!(o.passed() && !o.rule_holds());
        assert_eq!(o.exemptions, ex.to_vec());
        // A lint problem or a stale gate.toml is never waived.
        let lint = [Problem::new("docs/adr/0001-x.md", 3, "edited")];
        assert!(!evaluate(input(&one, &lint, &IN_SYNC)).passed());
        let stale = Ok(SyncState::OutOfDate { expected: String::new() });
        assert!(!evaluate(input(&one, &[], &stale)).passed());
    }

    /// A record that measured bench profile `profile` (its Context's `Measured scenario` line).
    fn measured(n: u32, status: &str, profile: &str) -> String {
        record(n, status, "Keep the scheduler.").replace(
            "Long prompts block decode.",
            &format!(
                "Long prompts block decode.\n\nMeasured scenario: profile `{profile}`, 64 requests."
            ),
        )
    }

    fn chats_changed(profile: &str) -> ScenarioChange {
        ScenarioChange {
            profile: profile.into(),
            key: infergate_model::config::ConfigKey::literal("workload.conversations"),
            file: "configs/workloads/chats.json".into(),
            how: "was modified".into(),
        }
    }

    #[test]
    fn thresholds_gate_the_profiles_they_name_or_every_profile() {
        let all = ["default".to_string(), "chat".to_string(), "trace".to_string()];
        let named = [Some("chat".to_string()), Some("chat".to_string()), Some("default".into())];
        assert_eq!(gated_profiles(&named, &all), vec!["chat".to_string(), "default".to_string()]);
        assert_eq!(gated_profiles(&[Some("chat".into()), None], &all), all.to_vec());
        assert!(gated_profiles(&[], &all).is_empty());
    }

    #[test]
    fn a_changed_workload_file_of_a_gated_profile_needs_a_record_measured_on_it() {
        let changes = [chats_changed("chat")];
        // No record: a violation at the file naming the profile and what to do.
        let v = scenario_edits(&changes, &[]);
        assert_eq!(v.len(), 1);
        let Violation::ScenarioChanged(p) = &v[0] else { panic!("{v:?}") };
        assert_eq!((p.path.to_str().unwrap(), p.line), ("configs/workloads/chats.json", 1));
        assert!(p.message.starts_with("configs/workloads/chats.json of gated profile `chat` (workload.conversations) was modified"), "{}", p.message);
        assert!(p.message.contains("measured on profile `chat`"), "{}", p.message);
        // An added Proposed record measured on the profile covers it.
        let ok = [RecordChange::added(path(5), measured(5, "Proposed", "chat"))];
        assert!(scenario_edits(&changes, &ok).is_empty());
        // Not: a record of another profile, a Rejected one, or an edited one.
        let other = [RecordChange::added(path(5), measured(5, "Accepted", "default"))];
        assert_eq!(scenario_edits(&changes, &other).len(), 1);
        let rejected = [RecordChange::added(path(5), measured(5, "Rejected", "chat"))];
        assert_eq!(scenario_edits(&changes, &rejected).len(), 1);
        let text = measured(5, "Proposed", "chat");
        let edited =
            [RecordChange::modified(path(5), &text.replace("64 requests", "32 requests"), &text)];
        assert_eq!(scenario_edits(&changes, &edited).len(), 1);
    }
}
