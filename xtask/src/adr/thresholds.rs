//! `thresholds/gate.toml`: the thresholds of the live records, each with its provenance.
//!
//! A record is live when its status is `Accepted` and no accepted record's Links say it
//! `Supersedes` it. [`generate`] collects the thresholds of the live records (limits in the
//! registry unit of their metric), [`render`] writes them in a fixed order (record number, then
//! line), and [`check_in_sync`] compares the result with the committed file.
//!
//! Units: a thresholds table writes each limit in the registry unit of its metric
//! (`bench::summary::known_metrics`), or in one of these aliases, converted when read:
//! `%` for `ratio` metrics (95 % -> 0.95) and `s` for `ms` metrics (0.2 s -> 200 ms).

use std::collections::BTreeMap;
use std::path::Path;

use bench::config::{ConfigError, Source};
use serde::{Deserialize, Serialize};

use super::model::{Action, Adr, AdrStatus, Comparator, LinkKind, Problem};

/// Where the thresholds live, relative to the repository root.
pub const GATE_FILE: &str = "thresholds/gate.toml";
/// The `version` of the gate.toml format this tool writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// One threshold in gate.toml: `measured <comparator> limit` must hold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Threshold {
    /// Dotted summary.json path from the metric registry.
    pub metric: String,
    pub comparator: Comparator,
    /// In `unit`, the registry unit of the metric.
    pub limit: f64,
    pub unit: String,
    pub action: Action,
    /// The bench profile whose runs this threshold gates (the record's measured scenario);
    /// absent: every run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Provenance: record number, file (relative to the repository root) and table-row line.
    pub adr: u32,
    pub file: String,
    pub line: usize,
}

/// The contents of gate.toml.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thresholds {
    pub version: u32,
    #[serde(default, rename = "threshold")]
    pub thresholds: Vec<Threshold>,
}

impl Thresholds {
    /// Read and validate a gate.toml (metrics known, units the registry's, limits finite).
    pub fn load(path: &Path) -> Result<Thresholds, ConfigError> {
        parse(&Source::read(path)?)
    }
}

/// Parse and validate gate.toml text. Errors name the file and, where known, the line.
pub fn parse(source: &Source) -> Result<Thresholds, ConfigError> {
    let t: Thresholds = source.parse()?;
    if t.version != FORMAT_VERSION {
        return Err(source.error_at(
            &["version"],
            format!(
                "version {} is not supported; this tool reads version {FORMAT_VERSION}",
                t.version
            ),
        ));
    }
    for (i, th) in t.thresholds.iter().enumerate() {
        let at = format!("threshold #{} (from {}:{})", i + 1, th.file, th.line);
        let Some(def) = bench::summary::metric_def(&th.metric) else {
            return Err(source.error(
                None,
                format!(
                    "{at}: unknown metric `{}`; see docs/adr/README.md for the metric names",
                    th.metric
                ),
            ));
        };
        if th.unit != def.unit {
            return Err(source.error(
                None,
                format!(
                    "{at}: unit `{}` is not `{}`, the unit of {}",
                    th.unit, def.unit, th.metric
                ),
            ));
        }
        if !th.limit.is_finite() {
            return Err(source.error(None, format!("{at}: limit is not a finite number")));
        }
    }
    Ok(t)
}

/// Convert a limit written in `written` to the registry unit `metric_unit`.
/// Accepted: the registry unit itself, `%` for `ratio` metrics, `s` for `ms` metrics.
pub fn to_metric_unit(
    value: f64,
    written: &str,
    metric_unit: &str,
    metric: &str,
) -> Result<f64, String> {
    let written = written.trim();
    match (metric_unit, written) {
        (u, w) if u == w => Ok(value),
        ("ratio", "%") => Ok(tidy(value / 100.0)),
        ("ms", "s") => Ok(tidy(value * 1000.0)),
        (u, w) => {
            let aliases = match u {
                "ratio" => " (or `%`)",
                "ms" => " (or `s`)",
                _ => "",
            };
            let w = if w.is_empty() { "(empty)" } else { w };
            Err(format!("unit `{w}` does not fit {metric}, whose unit is `{u}`{aliases}"))
        }
    }
}

/// A value with its unit for people (`201 ms`); ratios, counts and currency stand alone.
pub fn with_unit(v: f64, unit: &str) -> String {
    match unit {
        "ratio" | "count" | "currency" => format!("{v}"),
        u => format!("{v} {u}"),
    }
}

/// Remove binary floating-point noise from a converted value (0.9500000000000001 -> 0.95).
fn tidy(v: f64) -> f64 {
    format!("{v:.12e}").parse().unwrap_or(v)
}

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

/// The thresholds of the live records as they stand, in a stable order (record number, then
/// line), without validation. [`generate`] is the checked version.
pub fn live_thresholds(adrs: &[Adr]) -> Vec<Threshold> {
    let mut out = Vec::new();
    for adr in adrs.iter().filter(|a| is_live(a, adrs)) {
        let Some(number) = adr.number else { continue };
        let file = adr.path.to_string_lossy().replace('\\', "/");
        for row in &adr.thresholds {
            out.push(Threshold {
                metric: row.metric.clone(),
                comparator: row.comparator,
                limit: row.limit,
                unit: row.unit.clone(),
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

impl Threshold {
    /// Whether this threshold gates runs of bench profile `profile`.
    pub fn applies_to(&self, profile: &str) -> bool {
        self.profile.as_deref().is_none_or(|p| p == profile)
    }
}

/// Whether two scopes can gate the same run: the same profile, or one of them unscoped.
fn scopes_overlap(a: &Option<String>, b: &Option<String>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

fn scope_text(p: &Option<String>) -> String {
    p.as_ref().map_or("every profile".into(), |p| format!("profile `{p}`"))
}

/// For one scenario a metric may be set by one live record only: one problem per extra record,
/// naming both. Records that measured different bench profiles set their own thresholds.
pub fn conflicts(thresholds: &[Threshold]) -> Vec<Problem> {
    let mut by_metric: BTreeMap<&str, Vec<&Threshold>> = BTreeMap::new();
    for t in thresholds {
        by_metric.entry(&t.metric).or_default().push(t);
    }
    let mut problems = Vec::new();
    for (metric, ts) in by_metric {
        for (i, t) in ts.iter().enumerate() {
            let earlier = ts[..i].iter().find(|f| {
                (f.adr != t.adr || f.file != t.file) && scopes_overlap(&f.profile, &t.profile)
            });
            let Some(first) = earlier else { continue };
            let scope = if first.profile == t.profile {
                format!("for {}", scope_text(&t.profile))
            } else {
                format!("for {} and {}", scope_text(&first.profile), scope_text(&t.profile))
            };
            problems.push(Problem::new(
                &t.file,
                t.line,
                format!(
                    "metric `{metric}` is set by two live records {scope}: ADR-{:04} ({}:{}) and \
                     ADR-{:04} ({}:{}); supersede one of them (`cargo xtask adr supersede OLD NEW`)",
                    first.adr, first.file, first.line, t.adr, t.file, t.line
                ),
            ));
        }
    }
    problems
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
    if problems.is_empty() {
        Ok(Thresholds { version: FORMAT_VERSION, thresholds })
    } else {
        problems.sort();
        problems.dedup();
        Err(problems)
    }
}

/// gate.toml text: a header, then one `[[threshold]]` per threshold in the given order.
pub fn render(t: &Thresholds, adr_dir: &str) -> String {
    let s = |v: &str| toml::Value::String(v.to_string()).to_string();
    let mut out = format!(
        "# Generated by `cargo xtask adr thresholds` from the live (Accepted, not superseded)\n\
         # decision records in {adr_dir}. Do not edit: change or supersede a record and regenerate.\n\
         # `cargo xtask adr thresholds --check` fails when this file is out of date.\n\
         # A threshold with a `profile` gates runs of that bench profile only.\n\
         version = {}\n",
        t.version
    );
    for th in &t.thresholds {
        let profile =
            th.profile.as_ref().map_or(String::new(), |p| format!("profile = {}\n", s(p)));
        out.push_str(&format!(
            "\n[[threshold]]\nmetric = {}\ncomparator = {}\nlimit = {}\nunit = {}\naction = {}\n{profile}adr = {}\nfile = {}\nline = {}\n",
            s(&th.metric),
            s(th.comparator.as_str()),
            toml::Value::Float(th.limit),
            s(&th.unit),
            s(th.action.as_str()),
            th.adr,
            s(&th.file),
            th.line,
        ));
    }
    out
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
    let expected = render(&generate(adrs)?, adr_dir);
    Ok(match current {
        None => SyncState::Missing { expected },
        Some(cur) if cur.replace("\r\n", "\n") == expected => SyncState::UpToDate,
        Some(_) => SyncState::OutOfDate { expected },
    })
}

/// Lines that differ between two files: `-` only in `old`, `+` only in `new`, in order.
pub fn line_diff(old: &str, new: &str) -> Vec<String> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    // Longest common subsequence, small inputs.
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] =
                if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("-{}", a[i]));
            i += 1;
        } else {
            out.push(format!("+{}", b[j]));
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adr::parse_adr;

    fn record(n: u32, status: &str, rows: &str, links: &str) -> Adr {
        let text = format!(
            "# ADR-{n:04}: T\n\n- Status: {status}\n- Date: 2025-01-01\n- Deciders: a\n\n\
             ## CI gate thresholds\n\n| Metric | Comparator | Limit | Unit | Action |\n|---|---|---|---|---|\n{rows}\n\n\
             ## Links\n\n{links}\n"
        );
        parse_adr(Path::new(&format!("docs/adr/{n:04}-t.md")), &text)
    }

    #[test]
    fn units_convert_only_through_documented_aliases() {
        assert_eq!(to_metric_unit(95.0, "%", "ratio", "goodput.ratio"), Ok(0.95));
        assert_eq!(to_metric_unit(0.95, "ratio", "ratio", "goodput.ratio"), Ok(0.95));
        assert_eq!(to_metric_unit(0.2, "s", "ms", "metrics.ttft_ms.p99"), Ok(200.0));
        assert_eq!(to_metric_unit(7.0, "%", "ratio", "x"), Ok(0.07));
        let e = to_metric_unit(200.0, "%", "ms", "metrics.ttft_ms.p99").unwrap_err();
        assert!(e.contains("`ms` (or `s`)"), "{e}");
        assert!(to_metric_unit(1.0, "ms", "req/s", "throughput.requests_per_s").is_err());
        assert!(to_metric_unit(1.0, "", "ratio", "goodput.ratio").is_err());
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
        let text = render(&t, "docs/adr");
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

    #[test]
    fn gate_files_with_bad_units_or_keys_are_refused() {
        let ok = "version = 1\n[[threshold]]\nmetric = \"goodput.ratio\"\ncomparator = \">=\"\nlimit = 0.9\nunit = \"ratio\"\naction = \"block\"\nadr = 1\nfile = \"x.md\"\nline = 3\n";
        assert!(parse(&Source::new("g.toml", ok)).is_ok());
        let e = parse(&Source::new("g.toml", ok.replace("\"ratio\"", "\"%\""))).unwrap_err();
        assert!(e.to_string().contains("unit `%` is not `ratio`"), "{e}");
        let e = parse(&Source::new("g.toml", ok.replace("line = 3", "line = 3\nextra = 1")))
            .unwrap_err();
        assert_eq!(e.line, Some(11), "{e}");
        let e = parse(&Source::new("g.toml", ok.replace("\">=\"", "\"=>\""))).unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
    }

    #[test]
    fn line_diff_marks_changes() {
        assert_eq!(line_diff("a\nb\nc\n", "a\nx\nc\n"), vec!["-b", "+x"]);
    }
}
