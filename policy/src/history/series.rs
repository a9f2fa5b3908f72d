//! The history as series: per scenario and fingerprint, each metric's value at the commits of a
//! branch's first-parent line (main's), oldest first, with the change points between them
//! (`infergate_model::stats::changepoint`), the decision records changed in each change's commit range,
//! and the commits of that range that touched a governed file.
//!
//! A point is one commit: the trials of every set measured there (trial sets, noise runs and
//! A/B baselines; never an A/B candidate or a dirty work tree, which are not the commit), their
//! mean on the metric's scale (log values of a positive metric: the geometric mean) with a
//! Student t interval. Entries that cannot be placed are left out and named in
//! [`Built::notes`]: a commit not on the line (a rewritten main, another branch), no commit, a
//! dirty tree. Series of different scenarios or fingerprints are never joined; a series follows
//! its scenario across changes of the engine config ([`series_scenario`]).
//!
//! Pure: the line of commits and what the change points need of the repository ([`Lookups`])
//! are read from git by the command (`xtask::history::series`).

use std::collections::BTreeMap;

use anyhow::Context;
use infergate_model::history::{Entry, EntryKind, Fingerprint, Scenario};
use infergate_model::metric::{Better, MetricPath, Scale};
use infergate_model::stats::changepoint::{self, Detection, Settings};
use serde::Serialize;

/// A commit of the line.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Commit {
    pub id: String,
    /// `YYYY-MM-DD` and RFC 3339 (UTC) of the commit time.
    pub date: String,
    pub time: String,
    pub summary: String,
}

/// The first-parent line of a branch, oldest first.
#[derive(Clone, Debug, Default)]
pub struct Line {
    pub branch: String,
    pub commits: Vec<Commit>,
    positions: BTreeMap<String, usize>,
}

impl Line {
    /// The line of `branch` from its commits, oldest first.
    pub fn new(branch: &str, commits: Vec<Commit>) -> Line {
        let positions = commits.iter().enumerate().map(|(i, c)| (c.id.clone(), i)).collect();
        Line { branch: branch.to_string(), commits, positions }
    }

    pub fn position(&self, commit: &str) -> Option<usize> {
        self.positions.get(commit).copied()
    }

    pub fn short(&self, position: usize) -> String {
        self.commits[position].id.chars().take(12).collect()
    }
}

/// One commit's measurement of one metric.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// Index of the commit on the line.
    pub position: usize,
    pub commit: String,
    pub date: String,
    /// The trials' values (blanks left out).
    pub trials: Vec<f64>,
    /// Sets measured at this commit.
    pub sets: usize,
    /// The mean (geometric for a positive metric) and its 95% interval (blank for one trial).
    pub value: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    /// The accepted record in force at the commit (the highest-numbered one).
    pub record: Option<String>,
}

impl Point {
    /// The value the detector sees: log for a positive metric.
    fn scaled(&self, positive: bool) -> f64 {
        if positive { self.value.ln() } else { self.value }
    }
}

/// A change point of a series, placed on the line.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    /// The last point before the change and the first after it (positions on the line); the
    /// range is the commits after `last_good` up to and including `first_bad`.
    pub last_good: String,
    pub first_bad: String,
    pub commits_in_range: usize,
    /// Relative shift of a positive metric (`0.12`: 12% higher), points of a share, with the
    /// interval.
    pub shift: f64,
    pub lo: f64,
    pub hi: f64,
    pub p_value: f64,
    /// Whether the change is to the worse (by the metric's better direction).
    pub worse: bool,
    /// Decision records added or changed in the range.
    pub records: Vec<String>,
    /// Commits of the range that changed a governed file (`id summary`).
    pub governed: Vec<String>,
    /// Positions of the two ends on the line.
    #[serde(skip)]
    pub positions: (usize, usize),
}

/// A metric along the line for one scenario and fingerprint.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Series {
    pub scenario: Scenario,
    pub fingerprint: Fingerprint,
    pub metric: String,
    pub points: Vec<Point>,
    /// `None` until detected; [`Detection::TooFew`] says why nothing was decided.
    pub too_few: Option<(usize, usize)>,
    pub changes: Vec<Change>,
}

impl Series {
    pub fn positive(&self) -> bool {
        MetricPath::parse(&self.metric).map_or(true, |m| m.scale() == Scale::Positive)
    }

    pub fn lower_is_better(&self) -> bool {
        MetricPath::parse(&self.metric).map_or(true, |m| m.better() == Better::Lower)
    }

    /// `scenario <key> on <fingerprint key>`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.scenario.key(), self.fingerprint.key())
    }
}

/// What to build.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub metrics: Vec<String>,
    /// A scenario key (or its first characters).
    pub scenario: Option<String>,
    /// `YYYY-MM-DD`: points of commits from that day on.
    pub since: Option<String>,
}

/// The series and what was left out.
#[derive(Clone, Debug, Default)]
pub struct Built {
    pub line: Line,
    pub series: Vec<Series>,
    pub notes: Vec<String>,
    /// Whether the history ref exists (a history with no entry on the line is still one).
    pub has_history: bool,
}

/// The scenario a series follows: the set's, whatever the engine config (a change of it is
/// what the series watches; the noise history keeps it in the key, since another config is
/// another noise).
pub fn series_scenario(s: &Scenario) -> Scenario {
    Scenario { engine_config: String::new(), ..s.clone() }
}

/// The kinds whose trials measure the commit they name.
const SERIES_KINDS: &[EntryKind] = &[EntryKind::Trials, EntryKind::Noise, EntryKind::AbBaseline];

/// Build the series of `entries` along `line` (nothing detected yet).
pub fn build(line: Line, entries: &[Entry], filter: &Filter) -> Built {
    let mut notes = Vec::new();
    let (mut off_line, mut dirty, mut no_commit, mut candidates) = (vec![], 0, 0, 0);
    // (scenario, fingerprint) -> position -> entries
    let mut groups: BTreeMap<(Scenario, Fingerprint), BTreeMap<usize, Vec<&Entry>>> =
        BTreeMap::new();
    for e in entries {
        if !SERIES_KINDS.contains(&e.kind) {
            candidates += 1;
            continue;
        }
        let scenario = series_scenario(&e.scenario);
        if filter.scenario.as_ref().is_some_and(|s| {
            !e.scenario.key().starts_with(s.as_str()) && !scenario.key().starts_with(s.as_str())
        }) {
            continue;
        }
        let Some(commit) = &e.commit else {
            no_commit += 1;
            continue;
        };
        if e.dirty {
            dirty += 1;
            continue;
        }
        let Some(pos) = line.position(commit) else {
            off_line.push(commit.chars().take(12).collect::<String>());
            continue;
        };
        if filter.since.as_ref().is_some_and(|s| line.commits[pos].date.as_str() < s.as_str()) {
            continue;
        }
        groups
            .entry((scenario, e.fingerprint.clone()))
            .or_default()
            .entry(pos)
            .or_default()
            .push(e);
    }
    if !off_line.is_empty() {
        off_line.sort();
        off_line.dedup();
        notes.push(format!(
            "{} commit{} measured in the history {} not on {}'s first-parent line (a rewritten \
             branch, or another branch's commits): left out ({})",
            off_line.len(),
            if off_line.len() == 1 { "" } else { "s" },
            if off_line.len() == 1 { "is" } else { "are" },
            line.branch,
            off_line.join(", ")
        ));
    }
    if dirty > 0 {
        notes.push(format!("{dirty} sets measured a dirty work tree, not a commit: left out"));
    }
    if no_commit > 0 {
        notes.push(format!("{no_commit} sets name no commit (measured outside git): left out"));
    }
    if candidates > 0 {
        notes.push(format!(
            "{candidates} A/B candidate arms measured a change, not a commit of the line: left out"
        ));
    }
    let mut series = Vec::new();
    for ((scenario, fingerprint), by_pos) in groups {
        let mut metrics: Vec<String> =
            by_pos.values().flatten().flat_map(|e| e.values.keys().cloned()).collect();
        metrics.sort();
        metrics.dedup();
        if !filter.metrics.is_empty() {
            metrics.retain(|m| filter.metrics.contains(m));
        }
        for (pos, es) in &by_pos {
            if es.len() > 1 {
                notes.push(format!(
                    "{} (scenario {}) was measured by {} sets: their trials make one point",
                    line.short(*pos),
                    scenario.key(),
                    es.len()
                ));
            }
        }
        for metric in metrics {
            let positive =
                MetricPath::parse(&metric).map_or(true, |m| m.scale() == Scale::Positive);
            let points: Vec<Point> = by_pos
                .iter()
                .filter_map(|(pos, es)| point(&line, *pos, es, &metric, positive))
                .collect();
            if points.is_empty() {
                continue;
            }
            series.push(Series {
                scenario: scenario.clone(),
                fingerprint: fingerprint.clone(),
                metric,
                points,
                too_few: None,
                changes: vec![],
            });
        }
    }
    Built { line, series, notes, has_history: true }
}

fn point(line: &Line, pos: usize, es: &[&Entry], metric: &str, positive: bool) -> Option<Point> {
    let trials: Vec<f64> = es
        .iter()
        .flat_map(|e| e.values.get(metric).into_iter().flatten())
        .filter_map(|v| *v)
        .filter(|v| v.is_finite() && (!positive || *v > 0.0))
        .collect();
    if trials.is_empty() {
        return None;
    }
    let scaled: Vec<f64> = trials.iter().map(|v| if positive { v.ln() } else { *v }).collect();
    let back = |x: f64| if positive { x.exp() } else { x };
    // One trial has no interval: its value stands alone.
    let (mean, lo, hi) = match infergate_model::stats::interval::t_interval(&scaled, 0.95) {
        Ok((mean, lo, hi)) => (mean, Some(back(lo)), Some(back(hi))),
        Err(_) => (scaled[0], None, None),
    };
    Some(Point {
        position: pos,
        commit: line.commits[pos].id.clone(),
        date: line.commits[pos].date.clone(),
        trials,
        sets: es.len(),
        value: back(mean),
        lo,
        hi,
        record: None,
    })
}

/// What [`detect`] reads of the repository (the command side reads it from git): the record
/// in force at a commit of the line, and the records and governed files changed in a range.
pub trait Lookups {
    /// The accepted record in force at `pos` (the highest-numbered one).
    fn record_in_force(&mut self, pos: usize, line: &Line) -> anyhow::Result<Option<String>>;
    /// The records added or changed, and the commits that changed a governed file, in the
    /// commits after `good` up to `bad`.
    fn range(
        &self,
        line: &Line,
        good: usize,
        bad: usize,
    ) -> anyhow::Result<(Vec<String>, Vec<String>)>;
}

/// Detect the change points of every series, and fill in the records in force and the records
/// and governed files of each change's range (from `lookups`).
pub fn detect(
    lookups: &mut impl Lookups,
    built: &mut Built,
    settings: &Settings,
) -> anyhow::Result<()> {
    for s in &mut built.series {
        for p in &mut s.points {
            p.record = lookups.record_in_force(p.position, &built.line)?;
        }
        let positive = s.positive();
        let z: Vec<f64> = s.points.iter().map(|p| p.scaled(positive)).collect();
        match changepoint::detect(&z, settings) {
            Detection::TooFew { points, needed } => s.too_few = Some((points, needed)),
            Detection::Decided(found) => {
                for cp in found {
                    let good = s.points[cp.index - 1].position;
                    let bad = s.points[cp.index].position;
                    let rel = |x: f64| if positive { x.exp() - 1.0 } else { x };
                    let (records, governed) = lookups.range(&built.line, good, bad)?;
                    let lower_better = s.lower_is_better();
                    s.changes.push(Change {
                        last_good: built.line.commits[good].id.clone(),
                        first_bad: built.line.commits[bad].id.clone(),
                        commits_in_range: bad - good,
                        shift: rel(cp.shift),
                        lo: rel(cp.lo),
                        hi: rel(cp.hi),
                        p_value: cp.p_value,
                        worse: (cp.shift > 0.0) == lower_better,
                        records,
                        governed,
                        positions: (good, bad),
                    });
                }
            }
        }
    }
    Ok(())
}

/// `YYYY-MM-DD` or an error that says so.
pub fn parse_since(s: &str) -> anyhow::Result<String> {
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .map(|d| d.format("%Y-%m-%d").to_string())
        .with_context(|| format!("--since {s:?}: expected a date as YYYY-MM-DD"))
}
