//! The shards of a sharded run (`bench --shard I/N`, `bench::shard`) merged into one run
//! directory that `gate`, `adr new` and `report` read as any other run.
//!
//! **Exact**, as this module means it: the merged metrics are what one `MetricsAccumulator`
//! computes from every shard's `requests.jsonl` together, each shard's times moved onto one
//! timeline by the wall-clock time of its load clock's origin. Counts are sums, latency
//! percentiles are those of the concatenated records (never averages of the shards'
//! percentiles), and throughput is over the aligned window (the earliest measured start to the
//! latest measured end). As a cross-check, the shards' `histograms.hlog` are added bucket by
//! bucket and compared with the merged histograms; the report says whether they agree.
//!
//! The merge refuses shards of different runs (run id), shard counts, profiles, targets or
//! engine configs, and two directories of one shard, naming the directory. A missing shard, one
//! that ended interrupted, aborted or failed, or one whose files disagree with its summary
//! (`requests.jsonl` cut short or missing, its counts or last request not the summary's,
//! `histograms.hlog` missing, unreadable or not the records' histograms:
//! [`rundir::disagreements`]) is written into the merged status and notes: the merge is then
//! incomplete, never silently smaller.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use serde_json::Value;

use crate::metrics::{MetricsAccumulator, Window};
use crate::record::{RequestRecord, round_us};
use crate::rundir::{self, HISTOGRAMS_FILE, REQUESTS_FILE, RunDirError};
use crate::shard::{SUMMARY_KEY, ShardRecord};
use crate::summary::{Invocation, RunStatus, Summary};
pub use crate::summary::{MergeReport, MergedShard};

/// Load starts further apart than this (ms) get a note on the shards' clocks and start.
pub(crate) const SPREAD_NOTE_MS: f64 = 1000.0;

/// The load keys a shard holds its part of (`ShardTotal`): not compared between shards.
const SPLIT_KEYS: [&str; 6] =
    ["concurrency", "rate", "max_rate", "max_concurrency", "requests", "warmup_requests"];

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("nothing to merge: name the shard directories (`bench merge DIR...`)")]
    NoDirs,
    #[error(transparent)]
    Summary(#[from] crate::artifact::ArtifactError),
    #[error(
        "{}: not a shard of a sharded run (its summary.json has no `{SUMMARY_KEY}` section; \
         `bench --shard I/N` writes one)",
        dir.display()
    )]
    NotAShard { dir: PathBuf },
    #[error("{}: the `{SUMMARY_KEY}` section of summary.json is not valid: {message}", dir.display())]
    BadShard { dir: PathBuf, message: String },
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    #[error(
        "{}: run `{found}` is not run `{expected}` of {}; the shards of one run share its run id",
        dir.display(),
        first.display()
    )]
    DifferentRun { dir: PathBuf, found: String, expected: String, first: PathBuf },
    #[error(
        "{}: {} differs from {} ({}: {} against {}); shards of one run share it",
        dir.display(),
        diff.what,
        diff.first.display(),
        diff.key,
        diff.found,
        diff.expected
    )]
    Mismatch { dir: PathBuf, diff: Box<Difference> },
    #[error("{} and {} are both shard {shard}; merge one directory per shard", a.display(), b.display())]
    Duplicate { a: PathBuf, b: PathBuf, shard: String },
}

/// How a shard differs from the first one given.
#[derive(Debug)]
pub struct Difference {
    /// The first shard's directory.
    pub first: PathBuf,
    /// What differs: the profile, the target, ...
    pub what: &'static str,
    /// The differing key.
    pub key: String,
    pub found: String,
    pub expected: String,
}

/// One shard's run directory, read.
#[derive(Clone, Debug)]
pub struct ShardRun {
    pub dir: PathBuf,
    pub summary: Summary,
    pub shard: ShardRecord,
    pub load_started: chrono::DateTime<chrono::Utc>,
    pub records: Vec<RequestRecord>,
    /// Its `histograms.hlog`, by tag (`None`: missing or unreadable).
    pub histograms: Option<BTreeMap<String, Histogram<u64>>>,
    /// Where its files disagree with its summary ([`rundir::disagreements`]): the shard is
    /// then incomplete.
    pub problems: Vec<String>,
}

/// Read a shard's run directory.
pub(crate) fn read_shard(dir: &Path) -> Result<ShardRun, MergeError> {
    let summary = Summary::read(dir)?;
    let shard: ShardRecord = summary
        .extra
        .shard
        .clone()
        .ok_or_else(|| MergeError::NotAShard { dir: dir.to_path_buf() })?;
    let bad = |message: String| MergeError::BadShard { dir: dir.to_path_buf(), message };
    let load_started = chrono::DateTime::parse_from_rfc3339(&shard.load_started_at)
        .map_err(|e| bad(format!("load_started_at `{}`: {e}", shard.load_started_at)))?
        .to_utc();
    crate::shard::Shard::new(shard.index, shard.count).map_err(|e| bad(e.to_string()))?;
    let problems = rundir::disagreements(dir, &summary);
    // A shard whose records cannot be read is merged with none, and named.
    let records = rundir::read_records(dir).map(|r| r.records).unwrap_or_default();
    let histograms = std::fs::read(dir.join(HISTOGRAMS_FILE)).ok().and_then(|b| decode_hlog(&b));
    let dir = dir.to_path_buf();
    Ok(ShardRun { dir, summary, shard, load_started, records, histograms, problems })
}

pub use crate::rundir::decode_hlog;

/// The merged run: its summary, its records (each with its shard) and the accumulator.
pub struct Merged {
    pub summary: Summary,
    pub report: MergeReport,
    /// Records on the merged timeline, by intended send time, each with its shard index.
    pub records: Vec<(u32, RequestRecord)>,
    pub acc: MetricsAccumulator,
    /// Wall-clock time of the merged timeline's origin.
    pub origin: SystemTime,
}

/// Check that the shards are of one run and differ only in their part of the load; sorted by
/// index.
pub fn check(shards: &mut [ShardRun]) -> Result<(), MergeError> {
    check_same_run(shards)?;
    shards.sort_by_key(|s| s.shard.index);
    if let Some(w) = shards.windows(2).find(|w| w[0].shard.index == w[1].shard.index) {
        return Err(MergeError::Duplicate {
            a: w[0].dir.clone(),
            b: w[1].dir.clone(),
            shard: w[0].shard.shard().to_string(),
        });
    }
    Ok(())
}

/// Every shard against the first: run id, shard count and whole load, profile, engine config,
/// target.
fn check_same_run(shards: &[ShardRun]) -> Result<(), MergeError> {
    let Some(first) = shards.first() else { return Err(MergeError::NoDirs) };
    let mismatch = |s: &ShardRun, what, key: &str, found: String, expected: String| {
        let first = first.dir.clone();
        let diff = Difference { first, what, key: key.to_string(), found, expected };
        MergeError::Mismatch { dir: s.dir.clone(), diff: Box::new(diff) }
    };
    let comparable = |s: &ShardRun| {
        let mut config = s.summary.config.to_json();
        if let Some(load) = config.get_mut("load").and_then(Value::as_object_mut) {
            for k in SPLIT_KEYS {
                load.remove(k);
            }
        }
        crate::summary::flatten_params(&config)
    };
    let base = comparable(first);
    for s in shards.iter() {
        if s.summary.run_id != first.summary.run_id {
            return Err(MergeError::DifferentRun {
                dir: s.dir.clone(),
                found: s.summary.run_id.clone(),
                expected: first.summary.run_id.clone(),
                first: first.dir.clone(),
            });
        }
        let (a, b) = (&s.shard, &first.shard);
        if a.count != b.count || a.total != b.total {
            let show = |r: &ShardRecord| json_text(&serde_json::json!(r.total));
            let key = if a.count != b.count { "shard count" } else { "whole load" };
            let (found, expected) = if a.count != b.count {
                (a.count.to_string(), b.count.to_string())
            } else {
                (show(a), show(b))
            };
            return Err(mismatch(s, "the sharded run", key, found, expected));
        }
        if s.summary.profile != first.summary.profile {
            let (f, e) = (s.summary.profile.clone(), first.summary.profile.clone());
            return Err(mismatch(s, "the profile", "profile", f, e));
        }
        let here = comparable(s);
        let keys = here.keys().chain(base.keys());
        if let Some(key) = keys.into_iter().find(|k| here.get(*k) != base.get(*k)) {
            let text = |m: &BTreeMap<String, Value>| m.get(key).map_or("(unset)".into(), json_text);
            return Err(mismatch(s, "the profile", key, text(&here), text(&base)));
        }
        let engine = |s: &ShardRun| s.summary.engine.as_ref().map(|e| e.params.clone());
        if engine(s) != engine(first) {
            let file = |s: &ShardRun| {
                s.summary.engine.as_ref().map_or("(none)".into(), |e| e.file.clone())
            };
            return Err(mismatch(s, "the engine config", "engine", file(s), file(first)));
        }
        if (s.summary.target.url.as_str(), s.summary.target.model.as_str())
            != (first.summary.target.url.as_str(), first.summary.target.model.as_str())
        {
            let t = |s: &ShardRun| format!("{} {}", s.summary.target.url, s.summary.target.model);
            return Err(mismatch(s, "the target", "target", t(s), t(first)));
        }
    }
    Ok(())
}

fn json_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Merge checked shards (see [`check`]) into one run. Pure: nothing is read or written.
pub(crate) fn combine(shards: &[ShardRun], invocation: Option<Invocation>) -> Merged {
    let first = &shards[0];
    let count = first.shard.count;
    let origin = shards.iter().map(|s| s.load_started).min().expect("at least one shard");
    let offset = |s: &ShardRun| round_us((s.load_started - origin).as_seconds_f64() * 1000.0);
    let mut acc = MetricsAccumulator::new(first.summary.goodput.slo.clone());
    let mut records = Vec::new();
    let mut report_shards = Vec::new();
    for s in shards {
        let (off, shard) = (offset(s), s.shard.shard());
        let mut own = MetricsAccumulator::new(first.summary.goodput.slo.clone());
        for r in &s.records {
            let mut r = shift(r, off);
            r.item = shard.global_position(r.item);
            acc.add(&r);
            own.add(&r);
            records.push((shard.index, r));
        }
        report_shards.push(MergedShard {
            index: shard.index,
            dir: s.dir.display().to_string(),
            status: s.summary.status,
            hostname: s.summary.environment.hostname.clone(),
            load_started_at: s.shard.load_started_at.clone(),
            offset_ms: off,
            requests: own.progress().0,
            window: own.finish(None).window,
            problems: s.problems.clone(),
        });
    }
    records.sort_by(|(a, x), (b, y)| {
        x.intended_ms.total_cmp(&y.intended_ms).then(a.cmp(b)).then(x.id.cmp(&y.id))
    });
    let present: Vec<u32> = shards.iter().map(|s| s.shard.index).collect();
    let missing: Vec<u32> = (0..count).filter(|i| !present.contains(i)).collect();
    let common = common_window(&report_shards);
    let report = MergeReport {
        shard_count: count,
        complete: missing.is_empty()
            && shards
                .iter()
                .all(|s| s.summary.status == RunStatus::Complete && s.problems.is_empty()),
        missing,
        start_spread_ms: offset(shards.iter().max_by_key(|s| s.load_started).expect("a shard")),
        end_spread_ms: spread(report_shards.iter().map(|s| s.window.end_ms)),
        common_requests_per_s: common_rate(&common, &records),
        common_window: common,
        histograms_agree: histograms_agree(shards, &acc),
        shards: report_shards,
    };
    let summary = merged_summary(shards, &acc, &report, invocation);
    let origin = SystemTime::from(origin);
    Merged { summary, report, records, acc, origin }
}

/// A record `by` ms later on the timeline.
fn shift(r: &RequestRecord, by: f64) -> RequestRecord {
    let mut r = r.clone();
    let at = |t: f64| round_us(t + by);
    r.intended_ms = at(r.intended_ms);
    r.end_ms = at(r.end_ms);
    r.sent_ms = r.sent_ms.map(at);
    r.first_token_ms = r.first_token_ms.map(at);
    r.last_token_ms = r.last_token_ms.map(at);
    r.first_reasoning_ms = r.first_reasoning_ms.map(at);
    r.first_answer_ms = r.first_answer_ms.map(at);
    r
}

fn spread(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = values.flatten().collect();
    let max = v.iter().copied().reduce(f64::max)?;
    let min = v.iter().copied().reduce(f64::min)?;
    Some(round_us(max - min))
}

/// The latest start to the earliest end of the shards' measured windows (blank when they do
/// not overlap).
fn common_window(shards: &[MergedShard]) -> Window {
    let starts = shards.iter().map(|s| s.window.start_ms);
    let ends = shards.iter().map(|s| s.window.end_ms);
    let start = starts.collect::<Option<Vec<f64>>>().and_then(|v| v.into_iter().reduce(f64::max));
    let end = ends.collect::<Option<Vec<f64>>>().and_then(|v| v.into_iter().reduce(f64::min));
    match (start, end) {
        (Some(s), Some(e)) if e > s => {
            Window { start_ms: Some(s), end_ms: Some(e), duration_s: Some(round_us(e - s) / 1e3) }
        }
        _ => Window::default(),
    }
}

/// Ok measured requests ending inside `window`, per second of it.
fn common_rate(window: &Window, records: &[(u32, RequestRecord)]) -> Option<f64> {
    let (start, end, secs) = (window.start_ms?, window.end_ms?, window.duration_s?);
    let inside = |r: &RequestRecord| {
        !r.warmup && r.class == crate::Outcome::Ok && r.end_ms >= start && r.end_ms <= end
    };
    let n = records.iter().filter(|(_, r)| inside(r)).count();
    Some(round_us(n as f64 / secs))
}

/// Whether the shards' histogram logs, added together, hold exactly the merged histograms.
fn histograms_agree(shards: &[ShardRun], acc: &MetricsAccumulator) -> Option<bool> {
    let logs: Vec<&BTreeMap<String, Histogram<u64>>> =
        shards.iter().map(|s| s.histograms.as_ref()).collect::<Option<_>>()?;
    let buckets = rundir::buckets;
    Some(rundir::logged_histograms(acc).into_iter().all(|(tag, merged)| {
        let mut sum = Histogram::<u64>::new_from(merged);
        for log in &logs {
            if let Some(h) = log.get(tag) {
                if sum.add(h).is_err() {
                    return false;
                }
            }
        }
        buckets(&sum) == buckets(merged)
    }))
}

/// The merged summary: the first shard's header with the whole load, the merged metrics, the
/// status and notes the shards call for.
fn merged_summary(
    shards: &[ShardRun],
    acc: &MetricsAccumulator,
    report: &MergeReport,
    invocation: Option<Invocation>,
) -> Summary {
    let first = &shards[0];
    let total = &first.shard.total;
    let mut s = first.summary.clone();
    let open = s.config.profile().is_some_and(|p| p.load.mode == crate::config::LoadMode::Open);
    let requested_rate = if open { total.rate } else { None };
    s.set_metrics(acc.finish(requested_rate));
    if let Some(p) = s.config.profile_mut() {
        total.restore(&mut p.load);
    }
    s.workload.items = shards.iter().map(|x| x.summary.workload.items).sum();
    if let Some(trace) = &mut s.workload.trace {
        trace.records = shards
            .iter()
            .filter_map(|x| x.summary.workload.trace.as_ref().map(|t| t.records))
            .sum();
    }
    s.workload.input_length.realised = acc.input_len.stats();
    s.workload.output_length.realised = acc.output_len.stats();
    let started = shards.iter().map(|x| x.summary.timing.started_at.clone()).min();
    let ended = shards.iter().map(|x| x.summary.timing.ended_at.clone()).max();
    s.timing.started_at = started.unwrap_or_default();
    s.timing.ended_at = ended.unwrap_or_default();
    s.environment.noise = None;
    s.invocation = invocation;
    s.schedule.fell_behind = shards.iter().any(|x| x.summary.schedule.fell_behind);
    s.server = None;
    // It came from one shard's server counters: the merged run has none.
    s.goodput.token_ratio = None;
    s.extra = Default::default();
    s.extra.merge = Some(report.clone());
    s.cost = crate::cost::for_summary(&s);
    s.status = merged_status(shards, report, s.requests.ok);
    s.notes = merge_notes(shards, report);
    s
}

/// Aborted when a shard was; interrupted when one was, is missing or is incomplete (its files
/// disagree with its summary: part of the planned load); over-saturated when one was stopped
/// early for it; failed when one failed or nothing succeeded; else complete.
fn merged_status(shards: &[ShardRun], report: &MergeReport, ok: u64) -> RunStatus {
    let any = |st: RunStatus| shards.iter().any(|s| s.summary.status == st);
    if any(RunStatus::Aborted) {
        RunStatus::Aborted
    } else if any(RunStatus::Interrupted)
        || !report.missing.is_empty()
        || shards.iter().any(|s| !s.problems.is_empty())
    {
        RunStatus::Interrupted
    } else if any(RunStatus::Oversaturated) {
        RunStatus::Oversaturated
    } else if any(RunStatus::Failed) || ok == 0 {
        RunStatus::Failed
    } else {
        RunStatus::Complete
    }
}

fn merge_notes(shards: &[ShardRun], report: &MergeReport) -> Vec<String> {
    let n = report.shard_count;
    let mut notes = Vec::new();
    if !report.missing.is_empty() {
        let list: Vec<String> = report.missing.iter().map(|i| format!("{i}/{n}")).collect();
        notes.push(format!(
            "incomplete: shard(s) {} of this run are missing; the metrics cover {} of {n} shards, \
             not the planned load",
            list.join(", "),
            shards.len()
        ));
    }
    for s in shards.iter().filter(|s| !s.problems.is_empty()) {
        notes.push(format!(
            "incomplete: shard {} ({}) is not the run its summary describes: {}; the merge holds \
             what its records hold",
            s.shard.shard(),
            s.dir.display(),
            s.problems.join("; ")
        ));
    }
    for s in shards.iter().filter(|s| s.summary.status != RunStatus::Complete) {
        let status = serde_json::to_value(s.summary.status).unwrap_or_default();
        notes.push(format!(
            "shard {} ({}) ended {}: see its notes",
            s.shard.shard(),
            s.dir.display(),
            json_text(&status)
        ));
    }
    if report.start_spread_ms > SPREAD_NOTE_MS {
        notes.push(format!(
            "the shards' loads started {:.1} ms apart (wall clock): the windows are aligned by \
             the hosts' clocks, which must be in sync (NTP); use --start-at so the shards begin \
             together",
            report.start_spread_ms
        ));
    }
    if report.histograms_agree == Some(false) {
        notes.push(
            "the shards' histogram logs added together differ from the histograms of their \
             records: the metrics come from the records"
                .into(),
        );
    }
    if shards.iter().any(|s| s.summary.server.is_some()) {
        notes.push(
            "server-side metrics were scraped by each shard: see the shard directories".into(),
        );
    }
    for s in shards {
        notes.extend(
            s.summary.notes.iter().map(|note| format!("shard {}: {note}", s.shard.shard())),
        );
    }
    notes
}

/// Read, check and merge the shard directories `dirs` into the new run directory `out`:
/// `requests.jsonl` (every record with its `shard`), `histograms.hlog` and `summary.json`.
pub fn merge(
    dirs: &[PathBuf],
    out: &Path,
    invocation: Option<Invocation>,
) -> Result<Merged, MergeError> {
    let mut shards = dirs.iter().map(|d| read_shard(d)).collect::<Result<Vec<_>, _>>()?;
    check(&mut shards)?;
    let merged = combine(&shards, invocation);
    let lock = rundir::claim(out)?;
    let mut text = Vec::new();
    for (shard, r) in &merged.records {
        let mut v = serde_json::to_value(r).expect("records serialize");
        v["shard"] = (*shard).into();
        serde_json::to_writer(&mut text, &v).expect("records serialize");
        text.push(b'\n');
    }
    rundir::write_atomic(&out.join(REQUESTS_FILE), &text)?;
    let window = merged.summary.timing.window.duration_s.map(Duration::from_secs_f64);
    rundir::write_histograms(out, &merged.acc, merged.origin, window.unwrap_or_default())?;
    rundir::write_summary(out, &merged.summary)?;
    drop(lock);
    Ok(merged)
}
