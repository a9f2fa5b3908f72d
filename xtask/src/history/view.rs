//! `cargo xtask trend [--metric M] [--scenario KEY] [--since DATE] [--fail-on-regression]`: the series of
//! [`super::series`] as a console table, Apache Otava's CSV, JSONL or an HTML page of charts,
//! and the check that fails on a recent change to the worse that no decision record explains.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use infergate_model::stats::changepoint::Settings;
use serde::Serialize;

use super::series::{self, Built, Change, Filter, Series};
use crate::chart::{self, Axis, Chart, Mark, MarkAxis};
use crate::console::ConsoleTable;
use crate::exit::Status;
use crate::text::parse_fraction;
use crate::text::{BLANK, gh_escape, num};

#[derive(Debug, Args)]
pub struct SeriesArgs {
    /// Only this metric (repeatable), e.g. `metrics.ttft_ms.p99`; default: every metric.
    #[arg(long = "metric", value_name = "METRIC")]
    pub metrics: Vec<String>,
    /// Only this scenario (its key, or the key's first characters, as `history list` prints).
    #[arg(long, value_name = "KEY")]
    pub scenario: Option<String>,
    /// Only commits from this day on (`YYYY-MM-DD`).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// The branch whose first-parent commits the series follow.
    #[arg(long, value_name = "REV", default_value = "main")]
    pub branch: String,
    /// `table` (the console), `csv` (the columns Apache Otava's CSV importer reads: one
    /// scenario and fingerprint), `jsonl` (a point a line).
    #[arg(long, value_enum, default_value_t = SeriesFormat::Table)]
    pub format: SeriesFormat,
    /// Write the csv or jsonl here instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Also write an HTML page with a chart of each series (intervals, change points marked).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Exit 1 when a change point to the worse beyond --min-change has its first bad commit
    /// among the last --last commits and no decision record changed in its range.
    #[arg(long = "fail-on-regression")]
    pub check: bool,
    /// With --fail-on-regression: how many of the line's last commits are checked (at least 1).
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub last: u64,
    /// With --fail-on-regression: the smallest change that fails (relative; points for shares).
    #[arg(long, value_name = "P", default_value = "5%", value_parser = parse_fraction)]
    pub min_change: f64,
    /// The largest p-value of a change point (the permutation test's).
    #[arg(long, value_name = "P", default_value = "2%", value_parser = parse_fraction)]
    pub alpha: f64,
    /// With --fail-on-regression: also print GitHub annotations (`::error`) for each failure.
    #[arg(long)]
    pub github: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SeriesFormat {
    Table,
    Csv,
    Jsonl,
}

/// A failure of `--check`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Unexplained {
    pub series: String,
    pub metric: String,
    pub change: Change,
}

impl SeriesArgs {
    pub fn run(&self, root: &Path) -> anyhow::Result<Status> {
        let built = self.build(root)?;
        for n in &built.notes {
            eprintln!("note: {n}");
        }
        match self.format {
            SeriesFormat::Table => print!("{}", render_table(&built)),
            SeriesFormat::Csv => self.emit(root, &otava_csv(&built)?)?,
            SeriesFormat::Jsonl => self.emit(root, &jsonl(&built))?,
        }
        if let Some(path) = &self.html {
            let path = root.join(path);
            infergate_model::rundir::write_atomic(&path, page(&built).as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("history page: {}", path.display());
        }
        if !self.check {
            return Ok(Status::Success);
        }
        let last = usize::try_from(self.last).unwrap_or(usize::MAX);
        if let Some(why) = nothing_to_check(&built, last) {
            eprintln!("history check: nothing checked: {why}");
            return Ok(Status::NoData);
        }
        let failures = unexplained(&built, last, self.min_change);
        if failures.is_empty() {
            eprintln!(
                "history check: no change to the worse of {} or more without a record in the last {} commits",
                pct(self.min_change),
                self.last
            );
            return Ok(Status::Success);
        }
        for f in &failures {
            let line = format!(
                "{} of {} moved {} at {}..{} (p = {}) and no decision record changed in that range",
                f.metric,
                f.series,
                signed(f.change.shift, f.change.lo, f.change.hi, positive(&f.metric)),
                short(&f.change.last_good),
                short(&f.change.first_bad),
                num(f.change.p_value)
            );
            eprintln!("error: {line}");
            if self.github {
                println!(
                    "::error title={}::{}",
                    gh_escape(&format!("change point at {}", short(&f.change.first_bad)), true),
                    gh_escape(&line, false)
                );
            }
        }
        Ok(Status::PolicyViolated)
    }

    /// The series of the repository at `root`, detected.
    pub fn build(&self, root: &Path) -> anyhow::Result<Built> {
        let filter = Filter {
            metrics: self.metrics.clone(),
            scenario: self.scenario.clone(),
            since: self.since.as_deref().map(series::parse_since).transpose()?,
        };
        let history = crate::history_store::read(root)?;
        let repo = git2::Repository::discover(root)
            .with_context(|| format!("{} is not in a git repository", root.display()))?;
        let line = series::line(&repo, &self.branch)?;
        let mut built = series::build(line, &history.entries, &filter);
        built.has_history = history.tip.is_some();
        if !history.problems.is_empty() {
            built.notes.insert(
                0,
                format!("history files left out whole: {}", history.problems.join("; ")),
            );
        }
        let settings = Settings { alpha: self.alpha, ..Settings::default() };
        series::detect(&repo, &mut built, &settings)?;
        Ok(built)
    }

    fn emit(&self, root: &Path, text: &str) -> anyhow::Result<()> {
        match &self.out {
            Some(p) => {
                let path = root.join(p);
                infergate_model::rundir::write_atomic(&path, text.as_bytes())
                    .with_context(|| format!("cannot write {}", path.display()))
            }
            None => {
                print!("{text}");
                Ok(())
            }
        }
    }
}

fn short(id: &str) -> String {
    id.chars().take(12).collect()
}

/// Whether a history's metric (a name its file holds) is on a positive scale; a name the
/// registry does not know is taken as one.
fn positive(metric: &str) -> bool {
    infergate_model::metric::MetricPath::parse(metric)
        .map_or(true, |m| m.scale() == infergate_model::metric::Scale::Positive)
}

fn pct(v: f64) -> String {
    format!("{}%", num(v * 100.0))
}

/// `+12.3% [+8.1%, +16.4%]`, or points for a share.
fn signed(v: f64, lo: f64, hi: f64, positive: bool) -> String {
    let f = |x: f64| {
        if positive { format!("{:+.1}%", x * 100.0) } else { format!("{:+.1} points", x * 100.0) }
    };
    format!("{} [{}, {}]", f(v), f(lo), f(hi))
}

/// Why a check of the line's last `last` commits has nothing to decide on, if it has not: no
/// history at all, or no measured point (of the metrics and scenario asked for) among them.
pub(crate) fn nothing_to_check(built: &Built, last: usize) -> Option<String> {
    if !built.has_history {
        return Some(format!(
            "there is no {} in this repository",
            crate::history_store::HISTORY_REF
        ));
    }
    let from = built.line.commits.len().saturating_sub(last);
    let points = built.series.iter().flat_map(|s| &s.points).filter(|p| p.position >= from).count();
    (points == 0).then(|| {
        format!(
            "no measured commit among the last {last} of {} (the history holds none of them, or \
             none of the metrics or scenario asked for)",
            built.line.branch
        )
    })
}

/// The change points to the worse beyond `min_change` whose first bad commit is among the
/// line's last `last` commits, with no record changed in their range.
pub(crate) fn unexplained(built: &Built, last: usize, min_change: f64) -> Vec<Unexplained> {
    let from = built.line.commits.len().saturating_sub(last);
    let mut out = Vec::new();
    for s in &built.series {
        for c in &s.changes {
            if c.worse
                && c.shift.abs() >= min_change
                && c.positions.1 >= from
                && c.records.is_empty()
            {
                out.push(Unexplained {
                    series: s.key(),
                    metric: s.metric.clone(),
                    change: c.clone(),
                });
            }
        }
    }
    out
}

fn header(s: &Series) -> String {
    format!(
        "{} - scenario {} (profile {}, {} requests a trial) on {} ({}; {}; {})",
        s.metric,
        s.scenario.key(),
        s.scenario.profile,
        s.scenario.trial_requests,
        s.fingerprint.key(),
        s.fingerprint.host,
        s.fingerprint.gpu,
        s.fingerprint.engine
    )
}

/// The console: per series a table of its points and a line per change point.
pub fn render_table(built: &Built) -> String {
    let mut out = String::new();
    if built.series.is_empty() {
        let _ = writeln!(
            out,
            "no series: the history has no set measured at a commit of {}'s first-parent line",
            built.line.branch
        );
        return out;
    }
    for s in &built.series {
        let _ = writeln!(out, "{}", header(s));
        let mut t = ConsoleTable::markdown([
            "commit",
            "date",
            "trials",
            "value [95% interval]",
            "record in force",
        ]);
        for p in &s.points {
            let interval = match (p.lo, p.hi) {
                (Some(lo), Some(hi)) => format!("{} [{}, {}]", num(p.value), num(lo), num(hi)),
                _ => format!("{} (one trial: no interval)", num(p.value)),
            };
            t.row(vec![
                short(&p.commit),
                p.date.clone(),
                p.trials.len().to_string(),
                interval,
                p.record.clone().unwrap_or_else(|| BLANK.to_string()),
            ]);
        }
        let _ = writeln!(out, "{t}");
        if let Some((points, needed)) = s.too_few {
            let _ = writeln!(
                out,
                "change points: undecided, {points} points (the detector needs at least {needed})"
            );
        } else if s.changes.is_empty() {
            let _ = writeln!(out, "change points: none (no split significant at the set level)");
        }
        for c in &s.changes {
            let _ = writeln!(out, "{}", describe_change(s, c));
            if c.commits_in_range > 1 {
                let _ = writeln!(
                    out,
                    "  {} commits in the range: measure its ends with `git checkout {} && {} bench ab {} --profile {}`",
                    c.commits_in_range,
                    short(&c.first_bad),
                    crate::text::tool(),
                    short(&c.last_good),
                    s.scenario.profile
                );
                for g in &c.governed {
                    let _ = writeln!(out, "  changed a governed file: {g}");
                }
            }
        }
        out.push('\n');
    }
    out
}

fn describe_change(s: &Series, c: &Change) -> String {
    let records = if c.records.is_empty() {
        "no decision record changed in the range".to_string()
    } else {
        format!("records changed in the range: {}", c.records.join(", "))
    };
    format!(
        "change point: {}..{} ({} commit{}), {} {}, p = {}; {records}",
        short(&c.last_good),
        short(&c.first_bad),
        c.commits_in_range,
        if c.commits_in_range == 1 { "" } else { "s" },
        signed(c.shift, c.lo, c.hi, s.positive()),
        if c.worse { "worse" } else { "better" },
        num(c.p_value)
    )
}

/// One scenario and fingerprint as Apache Otava's CSV importer reads it: `time,commit,` then a
/// column per metric (the point's value; empty where the commit has none).
pub(crate) fn otava_csv(built: &Built) -> anyhow::Result<String> {
    let mut keys: Vec<String> = built.series.iter().map(Series::key).collect();
    keys.dedup();
    if keys.len() > 1 {
        bail!(
            "--format csv writes one scenario and fingerprint (Otava reads one test a file), and \
             {} are selected: {}; choose one with --scenario",
            keys.len(),
            keys.join(", ")
        );
    }
    let metrics: Vec<&str> = built.series.iter().map(|s| s.metric.as_str()).collect();
    let mut positions: Vec<usize> =
        built.series.iter().flat_map(|s| s.points.iter().map(|p| p.position)).collect();
    positions.sort();
    positions.dedup();
    let mut out = String::from("time,commit");
    for m in &metrics {
        out.push(',');
        out.push_str(m);
    }
    out.push('\n');
    for pos in positions {
        let c = &built.line.commits[pos];
        let _ = write!(out, "{},{}", c.time, c.id);
        for s in &built.series {
            out.push(',');
            if let Some(p) = s.points.iter().find(|p| p.position == pos) {
                out.push_str(&p.value.to_string());
            }
        }
        out.push('\n');
    }
    Ok(out)
}

#[derive(Serialize)]
struct PointLine<'a> {
    scenario: String,
    fingerprint: String,
    profile: &'a str,
    metric: &'a str,
    commit: &'a str,
    date: &'a str,
    position: usize,
    trials: usize,
    value: f64,
    lo: Option<f64>,
    hi: Option<f64>,
    record: Option<&'a str>,
}

/// A point a line.
pub fn jsonl(built: &Built) -> String {
    let mut out = String::new();
    for s in &built.series {
        for p in &s.points {
            let line = PointLine {
                scenario: s.scenario.key(),
                fingerprint: s.fingerprint.key(),
                profile: &s.scenario.profile,
                metric: &s.metric,
                commit: &p.commit,
                date: &p.date,
                position: p.position,
                trials: p.trials.len(),
                value: p.value,
                lo: p.lo,
                hi: p.hi,
                record: p.record.as_deref(),
            };
            out.push_str(&serde_json::to_string(&line).expect("points serialise"));
            out.push('\n');
        }
    }
    out
}

/// The chart of one series: the value and its interval along the line, change points marked.
pub(crate) fn chart_of(s: &Series) -> Chart {
    let x = |p: &series::Point| p.position as f64;
    let mut c = Chart::new(
        format!("history-{}-{}", s.key().replace('/', "-"), s.metric),
        header(s),
        Axis { from_zero: false, ..Axis::linear("commit along the line (oldest first)") },
        Axis { from_zero: false, ..Axis::linear(s.metric.clone()) },
    );
    c.series.push(chart::Series {
        markers: true,
        ..chart::Series::line("value", 0, s.points.iter().map(|p| (x(p), Some(p.value))).collect())
    });
    c.series.push(chart::Series::line(
        "95% interval, low",
        1,
        s.points.iter().map(|p| (x(p), p.lo)).collect(),
    ));
    c.series.push(chart::Series::line(
        "95% interval, high",
        1,
        s.points.iter().map(|p| (x(p), p.hi)).collect(),
    ));
    for ch in &s.changes {
        let record = s
            .points
            .iter()
            .find(|p| p.position == ch.positions.1)
            .and_then(|p| p.record.clone())
            .unwrap_or_else(|| "no record in force".into());
        c.marks.push(Mark::limit(
            MarkAxis::X,
            ch.positions.1 as f64 - 0.5,
            format!("{}..{} ({record})", short(&ch.last_good), short(&ch.first_bad)),
        ));
        c.notes.push(describe_change(s, ch));
    }
    if let Some((points, needed)) = s.too_few {
        c.notes.push(format!("undecided: {points} points, the detector needs {needed}"));
    }
    c
}

/// The HTML page: a chart per series.
pub fn page(built: &Built) -> String {
    let mut body = String::new();
    for s in &built.series {
        let _ = writeln!(body, "<section>{}</section>", chart::render(&chart_of(s)));
    }
    if built.series.is_empty() {
        body.push_str("<p>no series: nothing measured at a commit of the line</p>\n");
    }
    let notes: String =
        built.notes.iter().map(|n| format!("<li>{}</li>\n", chart::esc(n))).collect();
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>infergate history of {branch}</title></head>\n<body>\n<h1>History of {branch}</h1>\n<ul class=\"notes\">\n{notes}</ul>\n{body}</body></html>\n",
        branch = chart::esc(&built.line.branch)
    )
}
