//! The live records and their thresholds: what `thresholds/gate.toml` must hold.
//!
//! A record is live when its status is `Accepted` and no accepted record's Links say it
//! `Supersedes` it. [`generate`] collects the thresholds of the live records (limits in the
//! registry unit of their metric) in a fixed order (record number, then line), and
//! [`check_in_sync`] compares the file they render to with the committed one. The file format is
//! [`crate::thresholds::file`]'s.

use std::collections::BTreeMap;
use std::path::Path;

use super::model::{Adr, AdrStatus, Decided, DecisionLine, LinkKind, Part, Problem};
use crate::thresholds::file::{
    Budget, EnvironmentKey, FORMAT_VERSION, Threshold, Thresholds, render_file,
};
use crate::thresholds::rollback::RollbackCondition;

/// Whether a record is live: Accepted, and no Accepted record lists it under `Supersedes`.
pub fn is_live(adr: &Adr, all: &[Adr]) -> bool {
    if adr.status_value() != Some(AdrStatus::Accepted) {
        return false;
    }
    let Some(n) = adr.number else { return true };
    !all.iter().any(|other| {
        other.status_value() == Some(AdrStatus::Accepted)
            && other.links.iter().any(|l| l.kind == LinkKind::Supersedes && l.number == n)
    })
}

/// The parts of `adr` that other records supersede in part (`Supersedes in part NNNN: ...`),
/// with the superseding record's number. A superseding record counts once it was accepted (its
/// status is Accepted, or Superseded by a later record, which then decides those parts).
pub fn superseded_parts<'a>(adr: &Adr, all: &'a [Adr]) -> Vec<(u32, &'a Part)> {
    let Some(n) = adr.number else { return Vec::new() };
    let mut out = Vec::new();
    for other in all {
        let accepted =
            matches!(other.status_value(), Some(AdrStatus::Accepted | AdrStatus::SupersededBy(_)));
        let Some(by) = other.number.filter(|&m| m != n && accepted) else { continue };
        for l in
            other.links.iter().filter(|l| l.kind == LinkKind::SupersedesInPart && l.number == n)
        {
            out.extend(l.parts.iter().map(|p| (by, p)));
        }
    }
    out
}

/// The thresholds of the live records as they stand, in a stable order (record number, then
/// line), without validation. [`generate`] is the checked version. A metric another record
/// supersedes in part is not the older record's any more.
pub fn live_thresholds(adrs: &[Adr]) -> Vec<Threshold> {
    let mut out = Vec::new();
    for adr in adrs.iter().filter(|a| is_live(a, adrs)) {
        let Some(number) = adr.number else { continue };
        let file = adr.path.to_string_lossy().replace('\\', "/");
        let parts = superseded_parts(adr, adrs);
        for row in &adr.thresholds {
            if parts.iter().any(|(_, p)| matches!(p, Part::Metric(m) if *m == row.metric)) {
                continue;
            }
            out.push(Threshold {
                metric: row.metric,
                comparator: row.comparator,
                limit: row.limit,
                unit: row.unit.clone(),
                action: row.action,
                profile: adr.profile.as_ref().map(|p| p.value.clone()),
                scenario: adr.scenario.iter().cloned().collect(),
                environment: row.environment.clone(),
                load: row.load,
                adr: number,
                file: file.clone(),
                line: row.line,
            });
        }
    }
    out.sort_by(|a, b| (a.adr, &a.file, a.line).cmp(&(b.adr, &b.file, b.line)));
    out
}

/// The regression budgets of the live records (a metric superseded in part leaves with its
/// thresholds), in the order of [`live_thresholds`].
pub fn live_budgets(adrs: &[Adr]) -> Vec<Budget> {
    let mut out = Vec::new();
    for adr in adrs.iter().filter(|a| is_live(a, adrs)) {
        let Some(number) = adr.number else { continue };
        let file = adr.path.to_string_lossy().replace('\\', "/");
        let parts = superseded_parts(adr, adrs);
        for row in &adr.budgets {
            if parts.iter().any(|(_, p)| matches!(p, Part::Metric(m) if *m == row.metric)) {
                continue;
            }
            out.push(Budget {
                metric: row.metric,
                worse_by: row.worse_by,
                detect: row.detect,
                action: row.action,
                profile: adr.profile.as_ref().map(|p| p.value.clone()),
                adr: number,
                file: file.clone(),
                line: row.line,
            });
        }
    }
    out.sort_by(|a, b| (a.adr, &a.file, a.line).cmp(&(b.adr, &b.file, b.line)));
    out
}

/// Two live records budgeting the same metric for the same scope: one problem each, naming
/// the other.
fn budget_conflicts(budgets: &[Budget]) -> Vec<Problem> {
    let mut out = Vec::new();
    for (i, a) in budgets.iter().enumerate() {
        for b in &budgets[i + 1..] {
            let same_scope = a.profile.is_none() || b.profile.is_none() || a.profile == b.profile;
            if a.metric == b.metric && a.adr != b.adr && same_scope {
                out.push(Problem::new(
                    Path::new(&b.file),
                    b.line,
                    format!(
                        "budget of `{}` conflicts with ADR-{:04} ({}:{}), which budgets it for the same runs; supersede one",
                        b.metric, a.adr, a.file, a.line
                    ),
                ));
            }
        }
    }
    out
}

/// A rollback condition of a live record, with where it is written.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveCondition {
    pub adr: u32,
    /// The record's path as read (relative to the repository root in every command).
    pub file: String,
    pub title: String,
    pub condition: RollbackCondition,
}

/// The rollback conditions of the live records (a part superseded in part leaves with its
/// metric), ordered by record number then line.
pub fn live_rollback(adrs: &[Adr]) -> Vec<LiveCondition> {
    let mut out = Vec::new();
    for adr in adrs.iter().filter(|a| is_live(a, adrs)) {
        let Some(number) = adr.number else { continue };
        let parts = superseded_parts(adr, adrs);
        for c in &adr.rollback {
            if parts.iter().any(|(_, p)| matches!(p, Part::Metric(m) if *m == c.metric)) {
                continue;
            }
            out.push(LiveCondition {
                adr: number,
                file: adr.path.to_string_lossy().replace('\\', "/"),
                title: adr.title().unwrap_or_default().to_string(),
                condition: c.clone(),
            });
        }
    }
    out.sort_by_key(|a| (a.adr, a.condition.line));
    out
}

/// Notes for a new record `me`: each live record whose thresholds gate the same runs (same
/// profile, or one of them unscoped) and set a metric `me` sets, with the command that resolves
/// it. Accepting `me` is refused while such a record is live.
pub fn live_in_scope_of(me: &Adr, all: &[Adr]) -> Vec<String> {
    let mine = |o: &super::model::ThresholdRow| {
        me.thresholds.iter().any(|t| {
            t.metric == o.metric
                && t.load == o.load
                && environments_overlap(&t.environment, &o.environment)
        })
    };
    let scope = me.profile.as_ref().map(|p| p.value.clone());
    let mut out = Vec::new();
    for other in all.iter().filter(|a| a.path != me.path && is_live(a, all)) {
        let other_scope = other.profile.as_ref().map(|p| p.value.clone());
        let shared = other.thresholds.iter().filter(|t| mine(t)).count();
        if shared == 0 || !scopes_overlap(&scope, &other_scope) {
            continue;
        }
        let (o, n) = (
            other.number.map_or("OLD".into(), |n| n.to_string()),
            me.number.map_or("NEW".into(), |n| n.to_string()),
        );
        out.push(format!(
            "note: {} is live for {} and sets {} of this record's metrics; before `{tool} \
             adr accept {n}`, supersede it (`{tool} adr supersede {o} {n}`) or supersede \
             those thresholds in part (docs/adr/README.md, Partial supersession)",
            other.label(),
            scope_text(&other_scope),
            shared,
            tool = crate::text::tool()
        ));
    }
    out
}

/// Whether two scopes can gate the same run: the same profile, or one of them unscoped.
fn scopes_overlap(a: &Option<String>, b: &Option<String>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

/// Whether two thresholds' environments can gate the same run: the same key, or one of them
/// unkeyed (it holds for any environment).
fn environments_overlap(a: &Option<EnvironmentKey>, b: &Option<EnvironmentKey>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

fn scope_text(p: &Option<String>) -> String {
    p.as_ref().map_or("every profile".into(), |p| format!("profile `{p}`"))
}

fn environment_scope(e: &Option<EnvironmentKey>) -> String {
    e.as_ref().map_or("any environment".into(), |e| format!("`{e}`"))
}

/// For one scenario a metric may be set by one live record only: one problem per extra record,
/// naming both. Records that measured different bench profiles, or keyed their thresholds to
/// different environments, set their own thresholds; an unkeyed threshold holds for every
/// environment, so it conflicts with a keyed one of the same profile and metric. A load-bound
/// threshold ("holds the SLO at concurrency 24") asks another question than the metric's
/// threshold for the scenario: it conflicts only with one bound to the same load.
pub fn conflicts(thresholds: &[Threshold]) -> Vec<Problem> {
    let mut by_metric: BTreeMap<&str, Vec<&Threshold>> = BTreeMap::new();
    for t in thresholds {
        by_metric.entry(t.metric.as_str()).or_default().push(t);
    }
    let mut problems = Vec::new();
    for (metric, ts) in by_metric {
        for (i, t) in ts.iter().enumerate() {
            let earlier = ts[..i].iter().find(|f| {
                (f.adr != t.adr || f.file != t.file)
                    && f.load == t.load
                    && scopes_overlap(&f.profile, &t.profile)
                    && environments_overlap(&f.environment, &t.environment)
            });
            let Some(first) = earlier else { continue };
            let scope = if first.profile == t.profile {
                format!("for {}", scope_text(&t.profile))
            } else {
                format!("for {} and {}", scope_text(&first.profile), scope_text(&t.profile))
            };
            let scope = match &t.load {
                Some(load) => format!("{scope} at {load}"),
                None => scope,
            };
            let scope = if first.environment == t.environment {
                match &t.environment {
                    Some(env) => format!("{scope} on `{env}`"),
                    None => scope,
                }
            } else {
                format!(
                    "{scope} on {} and {}",
                    environment_scope(&first.environment),
                    environment_scope(&t.environment)
                )
            };
            problems.push(Problem::new(
                &t.file,
                t.line,
                format!(
                    "metric `{metric}` is set by two live records {scope}: ADR-{:04} ({}:{}) and \
                     ADR-{:04} ({}:{}); supersede one of them (`{} adr supersede OLD NEW`)",
                    first.adr,
                    first.file,
                    first.line,
                    t.adr,
                    t.file,
                    t.line,
                    crate::text::tool()
                ),
            ));
        }
    }
    problems
}

/// A governed key may be decided by one value among the live records: two live records that
/// name the same `file: key` with different values (or one `removed`) are one problem at the
/// later record's line, naming both. The same value twice is not a conflict.
pub fn decision_conflicts(adrs: &[Adr]) -> Vec<Problem> {
    let live: Vec<&Adr> = adrs.iter().filter(|a| is_live(a, adrs)).collect();
    let mut by_key: BTreeMap<(&str, &str), Vec<(&Adr, &DecisionLine)>> = BTreeMap::new();
    for adr in &live {
        let parts = superseded_parts(adr, adrs);
        for d in &adr.decisions {
            let taken = parts.iter().any(
                |(_, p)| matches!(p, Part::Key { file, key } if *file == d.file && *key == d.key),
            );
            if !taken {
                by_key.entry((&d.file, d.key.as_str())).or_default().push((adr, d));
            }
        }
    }
    let mut problems = Vec::new();
    for ((file, key), named) in by_key {
        for (i, (adr, d)) in named.iter().enumerate() {
            let earlier = named[..i]
                .iter()
                .find(|(a, e)| a.path != adr.path && !same_decision(&e.value, &d.value));
            let Some((first, fd)) = earlier else { continue };
            problems.push(Problem::new(
                &adr.path,
                d.line,
                format!(
                    "{file}: {key} is decided differently by two live records: {} ({}:{}) says \
                     {} and {} ({}:{}) says {}; supersede one of them (`{tool} adr \
                     supersede OLD NEW`, or in part: see docs/adr/README.md)",
                    first.label(),
                    first.path.display(),
                    fd.line,
                    fd.value,
                    adr.label(),
                    adr.path.display(),
                    d.line,
                    d.value,
                    tool = crate::text::tool()
                ),
            ));
        }
    }
    problems
}

fn same_decision(a: &Decided, b: &Decided) -> bool {
    match (a, b) {
        (Decided::Set(x), Decided::Set(y)) => crate::adr::check::semdiff::same_value(x, y),
        (Decided::Removed, Decided::Removed) => true,
        _ => false,
    }
}

/// A threshold that leaves or enters the live set (gate.toml) between two states of the records.
#[derive(Clone, Debug, PartialEq)]
pub struct ThresholdChange {
    /// `true`: it enters (at head); `false`: it leaves (it was in force at the merge base).
    pub enters: bool,
    pub threshold: Threshold,
}

impl std::fmt::Display for ThresholdChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = &self.threshold;
        write!(
            f,
            "{} {} {} ({}, {}{}, ADR-{:04} {}:{})",
            if self.enters { "+" } else { "-" },
            t.metric,
            t.limit_text(),
            t.action,
            scope_text(&t.profile),
            t.environment.as_ref().map_or(String::new(), |e| format!(" on `{e}`")),
            t.adr,
            t.file,
            t.line
        )
    }
}

/// What leaves and what enters the live thresholds from `before` to `after`: a threshold is the
/// same when its metric, comparator, limit, unit, action, profile, scenario, environment, load
/// and record are (its line may move). Those that leave come first, each group in the given order.
pub fn threshold_changes(before: &[Threshold], after: &[Threshold]) -> Vec<ThresholdChange> {
    let same = |a: &Threshold, b: &Threshold| {
        (&a.metric, a.comparator, &a.unit, a.action, &a.profile, a.adr)
            == (&b.metric, b.comparator, &b.unit, b.action, &b.profile, b.adr)
            && a.limit.to_bits() == b.limit.to_bits()
            && a.scenario == b.scenario
            && a.environment == b.environment
            && a.load == b.load
    };
    let leave = before.iter().filter(|b| !after.iter().any(|a| same(a, b)));
    let enter = after.iter().filter(|a| !before.iter().any(|b| same(a, b)));
    leave
        .map(|t| ThresholdChange { enters: false, threshold: t.clone() })
        .chain(enter.map(|t| ThresholdChange { enters: true, threshold: t.clone() }))
        .collect()
}

/// The thresholds of the live records, in a stable order (record number, then line).
///
/// Errors (all of them, as `path:line: message`): a record whose status is missing or unknown
/// (its thresholds could be live); any problem in a live record or a live record without a
/// number; a metric set by two live records (both named).
pub fn generate(adrs: &[Adr]) -> Result<Thresholds, Vec<Problem>> {
    let mut problems = Vec::new();
    for adr in adrs {
        if adr.status.is_none() {
            problems.extend(adr.status_problems().into_iter().map(|p| Problem {
                message: format!("{}; whether its thresholds are live is unknown", p.message),
                ..p
            }));
        } else if is_live(adr, adrs) {
            problems.extend(adr.problems.iter().cloned());
            if adr.number.is_none() {
                problems.push(Problem::new(
                    &adr.path,
                    1,
                    "file name is not `NNNN-slug.md`: the record has no number",
                ));
            }
        }
    }
    let thresholds = live_thresholds(adrs);
    problems.extend(conflicts(&thresholds));
    let budgets = live_budgets(adrs);
    problems.extend(budget_conflicts(&budgets));
    if problems.is_empty() {
        Ok(Thresholds { version: FORMAT_VERSION, thresholds, budgets })
    } else {
        problems.sort();
        problems.dedup();
        Err(problems)
    }
}

/// Result of comparing the committed gate.toml with what the records say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyncState {
    UpToDate,
    /// The file does not exist.
    Missing {
        expected: String,
    },
    /// The file differs from `expected`.
    OutOfDate {
        expected: String,
    },
}

/// Compare `current` (the committed file's text, `None` when absent) with the file the records
/// generate. Errors are the problems of [`generate`].
pub fn check_in_sync(
    adrs: &[Adr],
    adr_dir: &str,
    current: Option<&str>,
) -> Result<SyncState, Vec<Problem>> {
    let expected = render_file(&generate(adrs)?, adr_dir);
    Ok(match current {
        None => SyncState::Missing { expected },
        Some(cur) if cur.replace("\r\n", "\n") == expected => SyncState::UpToDate,
        Some(_) => SyncState::OutOfDate { expected },
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use infergate_model::config::Source;

    use super::*;
    use crate::adr::parse::parse_adr;
    use crate::thresholds::file::parse;

    fn record(n: u32, status: &str, rows: &str, links: &str) -> Adr {
        let text = format!(
            "# ADR-{n:04}: T\n\n- Status: {status}\n- Date: 2025-01-01\n- Deciders: a\n\n\
             ## CI gate thresholds\n\n| Metric | Comparator | Limit | Unit | Action |\n|---|---|---|---|---|\n{rows}\n\n\
             ## Links\n\n{links}\n"
        );
        parse_adr(Path::new(&format!("docs/adr/{n:04}-t.md")), &text)
    }

    #[test]
    fn only_live_records_count_and_order_is_stable() {
        let adrs = vec![
            record(
                2,
                "Accepted",
                "| goodput.ratio | >= | 95 | % | block |\n| metrics.ttft_ms.p99 | <= | 0.2 | s | warn |",
                "None.",
            ),
            record(
                1,
                "Superseded by 0002",
                "| error_rate | <= | 0.01 | ratio | block |",
                "- Superseded by 0002",
            ),
            record(3, "Proposed", "| error_rate | <= | 0.5 | ratio | block |", "None."),
        ];
        let t = generate(&adrs).unwrap();
        let got: Vec<(&str, f64, u32, usize)> =
            t.thresholds.iter().map(|t| (t.metric.as_str(), t.limit, t.adr, t.line)).collect();
        assert_eq!(
            got,
            vec![("goodput.ratio", 0.95, 2, 11), ("metrics.ttft_ms.p99", 200.0, 2, 12)]
        );
        assert_eq!(t.thresholds[0].file, "docs/adr/0002-t.md");
        let text = render_file(&t, "docs/adr");
        assert_eq!(parse(&Source::new("gate.toml", text.clone())).unwrap(), t);
        assert_eq!(check_in_sync(&adrs, "docs/adr", Some(&text)), Ok(SyncState::UpToDate));
        assert_eq!(
            check_in_sync(&adrs, "docs/adr", Some(&text.replace('\n', "\r\n"))),
            Ok(SyncState::UpToDate)
        );
        let stale = text.replace("0.95", "0.9");
        assert!(matches!(
            check_in_sync(&adrs, "docs/adr", Some(&stale)),
            Ok(SyncState::OutOfDate { .. })
        ));
        assert!(matches!(check_in_sync(&adrs, "docs/adr", None), Ok(SyncState::Missing { .. })));
    }

    #[test]
    fn an_accepted_record_listing_supersedes_retires_the_old_one() {
        let adrs = vec![
            record(1, "Accepted", "| goodput.ratio | >= | 0.9 | ratio | block |", "None."),
            record(
                2,
                "Accepted",
                "| goodput.ratio | >= | 0.95 | ratio | block |",
                "- Supersedes 0001",
            ),
        ];
        let t = generate(&adrs).unwrap();
        assert_eq!(t.thresholds.len(), 1);
        assert_eq!(t.thresholds[0].adr, 2);
    }

    #[test]
    fn two_live_records_on_one_metric_name_both() {
        let adrs = vec![
            record(1, "Accepted", "| goodput.ratio | >= | 0.9 | ratio | block |", "None."),
            record(4, "Accepted", "| goodput.ratio | >= | 0.95 | ratio | warn |", "None."),
        ];
        let problems = generate(&adrs).unwrap_err();
        assert_eq!(problems.len(), 1);
        let p = problems[0].to_string();
        assert!(p.starts_with("docs/adr/0004-t.md:11: metric `goodput.ratio`"), "{p}");
        assert!(
            p.contains("ADR-0001 (docs/adr/0001-t.md:11)")
                && p.contains("ADR-0004 (docs/adr/0004-t.md:11)"),
            "{p}"
        );
    }

    /// Records keyed to two environments stand side by side; an unkeyed one holds for both,
    /// and two keyed to the same environment are a conflict naming it.
    #[test]
    fn thresholds_keyed_to_other_environments_do_not_conflict() {
        let keyed = |n: u32, gpu: &str| {
            let text = format!(
                "# ADR-{n:04}: T\n\n- Status: Accepted\n- Date: 2025-01-01\n- Deciders: a\n\n\
                 ## CI gate thresholds\n\n\
                 | Metric | Comparator | Limit | Unit | Action | Environment |\n|---|---|---|---|---|---|\n\
                 | goodput.ratio | >= | 0.9 | ratio | block | `gpu={gpu} x1; engine=vllm; model=m; dtype=bfloat16` |\n\n\
                 ## Links\n\nNone.\n"
            );
            parse_adr(Path::new(&format!("docs/adr/{n:04}-t.md")), &text)
        };
        let (h100, a100) = (keyed(1, "H100-SXM-80GB"), keyed(2, "A100-80GB"));
        assert!(h100.problems.is_empty(), "{:?}", h100.problems);
        let t = generate(&[h100.clone(), a100.clone()]).unwrap();
        let envs: Vec<String> = t.thresholds.iter().map(|t| t.environment_text()).collect();
        assert_eq!(
            envs,
            [
                "gpu=H100-SXM-80GB x1; engine=vllm; model=m; dtype=bfloat16",
                "gpu=A100-80GB x1; engine=vllm; model=m; dtype=bfloat16"
            ]
        );
        let text = render_file(&t, "docs/adr");
        assert!(text.contains("environment = \"gpu=A100-80GB x1; engine=vllm"), "{text}");
        assert_eq!(parse(&Source::new("gate.toml", text)).unwrap(), t);
        let p = generate(&[h100.clone(), keyed(3, "H100-SXM-80GB")]).unwrap_err();
        assert_eq!(p.len(), 1);
        assert!(p[0].message.contains("on `gpu=H100-SXM-80GB x1; engine=vllm"), "{}", p[0]);
        let any = record(4, "Accepted", "| goodput.ratio | >= | 0.95 | ratio | block |", "None.");
        let p = generate(&[h100, a100, any]).unwrap_err();
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].message.contains("and any environment"), "{}", p[0]);
    }

    #[test]
    fn two_live_records_deciding_one_key_differently_are_named_both() {
        let with = |n: u32, status: &str, decision: &str, links: &str| {
            let text = format!(
                "# ADR-{n:04}: T\n\n- Status: {status}\n\n## Decision\n\n{decision}\n\n## Links\n\n{links}\n"
            );
            parse_adr(Path::new(&format!("docs/adr/{n:04}-t.md")), &text)
        };
        let one =
            with(1, "Accepted", "- configs/engine.toml: scheduler.max_num_seqs = 256", "None.");
        let two =
            with(2, "Accepted", "- configs/engine.toml: scheduler.max_num_seqs = 384", "None.");
        let p = decision_conflicts(&[one.clone(), two.clone()]);
        assert_eq!(p.len(), 1, "{p:?}");
        let text = p[0].to_string();
        assert!(text.starts_with("docs/adr/0002-t.md:7: configs/engine.toml: scheduler.max_num_seqs is decided differently by two live records: ADR-0001 (docs/adr/0001-t.md:7) says = 256 and ADR-0002 (docs/adr/0002-t.md:7) says = 384"), "{text}");
        // The same value, a Proposed record, or a superseded one: no conflict.
        let same =
            with(2, "Accepted", "- configs/engine.toml: scheduler.max_num_seqs = 256", "None.");
        assert!(decision_conflicts(&[one.clone(), same]).is_empty());
        let proposed =
            with(2, "Proposed", "- configs/engine.toml: scheduler.max_num_seqs = 384", "None.");
        assert!(decision_conflicts(&[one.clone(), proposed]).is_empty());
        let superseding = with(
            2,
            "Accepted",
            "- configs/engine.toml: scheduler.max_num_seqs = 384",
            "- Supersedes 0001",
        );
        assert!(decision_conflicts(&[one, superseding]).is_empty());
    }

    #[test]
    fn unknown_status_and_problems_in_live_records_stop_generation() {
        let adrs =
            vec![record(1, "Acepted", "| goodput.ratio | >= | 0.9 | ratio | block |", "None.")];
        let p = generate(&adrs).unwrap_err();
        assert_eq!((p.len(), p[0].line), (1, 3));
        assert!(p[0].message.contains("unknown status `Acepted`"), "{}", p[0]);
        assert!(p[0].message.ends_with("whether its thresholds are live is unknown"), "{}", p[0]);
        let adrs =
            vec![record(1, "Accepted", "| goodput.ratio | >= | 0.9 | ratio | stop |", "None.")];
        let p = generate(&adrs).unwrap_err();
        assert_eq!((p[0].line, p[0].message.contains("unknown action `stop`")), (11, true));
    }
}
