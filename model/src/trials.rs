//! Trial sets: the same profile measured N times, each trial an ordinary run directory inside
//! the set's directory, and `trials.json` beside them. A single run directory is a set of one.
//!
//! [`TrialSet::load`] reads a set (or a run) back from its run directories: the runs are the
//! truth, `trials.json` lists them and keeps the estimates the bench computed for the reader.
//! [`TrialSet::estimate`] gives a metric's [`Estimate`] with its interval, by the metric's kind
//! ([`MetricKind`]):
//!
//! - Two trials or more: the Student t interval across the trials' values (each trial's value
//!   as its summary states it), counting run-to-run variance.
//! - One trial, a metric computed from the request records (latencies, throughput, goodput,
//!   error rate, schedule lag): the request bootstrap, every replicate the run's records drawn
//!   with replacement and fed through the same [`MetricsAccumulator`] the run used, so the
//!   definitions cannot drift. It counts request-to-request variance only (marked).
//! - Counts (`unit = "count"`): observed, no interval ([`Method::Observed`]).
//! - One trial, a metric that does not come from the records (server-side, cost, acceptance):
//!   no interval; the estimate is blank and says why.
//!
//! Warmup trials (`load.warmup_trials`) are listed in [`TrialsFile::warmup`] with their
//! headline metrics and are never read into a [`TrialSet`]. [`cold_start`] flags a set whose
//! trial 1 is an outlier above the others in a latency metric (a note; the estimates stay).
//!
//! `docs/statistics.md` states the methods and their assumptions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::metrics::{MetricsAccumulator, Slo};
use crate::record::RequestRecord;
use crate::rundir::{self, REQUESTS_FILE};
use crate::stats::{self, Estimate, Method, Options};
/// How a metric's interval is computed: where its samples come from, as the registry says.
pub use crate::summary::MetricKind;
use crate::summary::{RunStatus, Summary, metric_def};

/// The trial set's index, in the set's directory.
pub const TRIALS_FILE: &str = "trials.json";
/// The `format_version` of `trials.json` this tool writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// The metrics a trial set estimates besides those its thresholds name: TTFT, TPOT, ITL and
/// E2E mean and P99, throughput, goodput and the error rate.
pub const DEFAULT_METRICS: &[&str] = &[
    "metrics.ttft_ms.mean",
    "metrics.ttft_ms.p99",
    "metrics.tpot_ms.mean",
    "metrics.tpot_ms.p99",
    "metrics.itl_ms.mean",
    "metrics.itl_ms.p99",
    "metrics.e2e_ms.mean",
    "metrics.e2e_ms.p99",
    "throughput.output_tokens_per_s",
    "throughput.requests_per_s",
    "goodput.requests_per_s",
    "goodput.ratio",
    "error_rate",
];

/// The summary path of the sample count behind `metric`'s statistic, from the registry.
fn samples_path(metric: &str) -> Option<&'static str> {
    metric_def(metric)?.samples
}

/// Whether `n` samples are too few for a statistic with `tail` share beyond it.
fn tail_undersampled(tail: f64, n: u64) -> bool {
    tail <= 0.0 || stats::undersampled(1.0 - tail, n)
}

/// One trial of a set: its run directory and summary.
#[derive(Clone, Debug)]
pub struct Trial {
    pub dir: PathBuf,
    pub summary: Summary,
}

/// A set of trials of one profile, read back from their run directories.
#[derive(Clone, Debug)]
pub struct TrialSet {
    /// The set's directory (a trial set), or the run's directory (a set of one).
    pub dir: PathBuf,
    pub trials: Vec<Trial>,
    /// The set's index when it is a trial set (`None` for a single run).
    pub index: Option<TrialsFile>,
    /// What makes the set incomplete, one sentence each ([`integrity`]): a trial whose files
    /// disagree with its summary, a trial directory `trials.json` does not list. Empty for a
    /// single run and for a set whose trials are what their summaries say.
    pub problems: Vec<String>,
}

/// `trials.json`: the trials of a set and, per gated metric, the estimate the bench computed
/// when it wrote the set. Rewritten (atomically) after every trial, so an interrupted set
/// lists what it measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialsFile {
    pub format_version: u32,
    /// The set's id: trial N's run id is `<run_id>-tNN`.
    #[serde(default)]
    pub run_id: String,
    pub profile: String,
    /// The `cargo xtask bench` arguments that measure one more trial of this set with the
    /// same settings (profile, config, target, overrides; an API key only by the name of its
    /// variable), relative to the repository root: `gate --until-decided` adds trials with
    /// them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bench_args: Vec<String>,
    /// Trials asked for; `trials.len()` of them were measured.
    pub planned: u32,
    /// Seconds waited between trials.
    #[serde(default)]
    pub cooldown_s: f64,
    /// Coverage of the intervals in `metrics`.
    pub confidence: f64,
    pub trials: Vec<TrialEntry>,
    /// Per metric: each trial's value and the estimate.
    #[serde(default)]
    pub metrics: BTreeMap<String, MetricEstimate>,
    #[serde(default)]
    pub notes: Vec<String>,
    /// Warmup trials (`load.warmup_trials`, `--warmup-trials`): measured before the trials, in
    /// `warmup-NN/`, listed with their headline metrics and never part of an estimate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warmup: Vec<TrialEntry>,
    /// Trial 1 looks like a cold start ([`cold_start`]); the estimates are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_start: Option<ColdStart>,
}

/// One trial in `trials.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialEntry {
    /// The trial's run directory, relative to the set's directory.
    pub dir: String,
    pub run_id: String,
    pub status: RunStatus,
    /// Measured requests, and how many were ok.
    pub requests: u64,
    pub ok: u64,
    /// The client host was busy during the trial's window (`environment.noise`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host_busy: bool,
    /// A warmup trial's [`HEADLINE_METRICS`] (blank where not measured); empty for trials.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headline: BTreeMap<String, Option<f64>>,
}

/// The metrics a warmup trial is listed with in `trials.json`.
pub const HEADLINE_METRICS: &[&str] = &[
    "metrics.ttft_ms.p99",
    "metrics.tpot_ms.p99",
    "metrics.e2e_ms.p99",
    "throughput.output_tokens_per_s",
    "error_rate",
];

/// Trial 1 is flagged as a cold start when its value of a latency metric is more than
/// `COLD_RATIO` times the median of the other trials ...
pub(crate) const COLD_RATIO: f64 = 1.5;
/// ... and more than `COLD_MADS` scaled median absolute deviations (MAD x 1.4826, the
/// standard deviation of normal values) of the other trials above their median.
pub(crate) const COLD_MADS: f64 = 5.0;
/// The rule needs trial 1 and at least this many others.
pub(crate) const COLD_MIN_OTHERS: usize = 2;

/// Trial 1 of a set looks like a cold start: the latency metrics where it is an outlier above
/// the other trials, and the note that says so. The set's estimates are not changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColdStart {
    pub metrics: Vec<ColdMetric>,
    pub note: String,
}

/// One latency metric where trial 1 is an outlier.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColdMetric {
    pub metric: String,
    /// Trial 1's value.
    pub first: f64,
    /// The median of the other trials' values.
    pub median_others: f64,
}

/// Whether `first` is an outlier above `others` by the documented rule: at least
/// [`COLD_MIN_OTHERS`] others, `first > COLD_RATIO x median` and
/// `first > median + COLD_MADS x 1.4826 x MAD` (a MAD of 0, identical others, leaves the ratio
/// alone to decide). Returns the others' median when it is.
pub(crate) fn is_cold(first: f64, others: &[f64]) -> Option<f64> {
    if others.len() < COLD_MIN_OTHERS || !first.is_finite() || others.iter().any(|v| !v.is_finite())
    {
        return None;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
    };
    let med = median(&mut others.to_vec());
    let mad = median(&mut others.iter().map(|v| (v - med).abs()).collect());
    (med > 0.0 && first > COLD_RATIO * med && first > med + COLD_MADS * 1.4826 * mad).then_some(med)
}

/// A latency metric's name in a note: `TTFT P99`, `E2E mean`.
fn metric_words(metric: &str) -> String {
    let label = metric_def(metric).map_or(metric, |d| d.label);
    match metric.rsplit('.').next() {
        Some(stat) if stat.starts_with('p') => format!("{label} {}", stat.to_uppercase()),
        Some(stat) => format!("{label} {stat}"),
        None => label.to_string(),
    }
}

/// The cold-start check of a set over `per_trial` values by metric: every latency metric
/// (`metrics.*`, unit ms) whose trial-1 value [`is_cold`] against the rest. `None` when no
/// metric is, or the set has fewer than `1 + COLD_MIN_OTHERS` trials.
pub fn cold_start<'a>(
    per_trial: impl IntoIterator<Item = (&'a str, &'a [Option<f64>])>,
) -> Option<ColdStart> {
    let mut metrics = Vec::new();
    for (metric, values) in per_trial {
        let latency =
            metric.starts_with("metrics.") && metric_def(metric).is_some_and(|d| d.unit == "ms");
        let Some((Some(first), rest)) = values.split_first() else { continue };
        let others: Option<Vec<f64>> = rest.iter().copied().collect();
        let Some(others) = others.filter(|_| latency) else { continue };
        if let Some(median_others) = is_cold(*first, &others) {
            metrics.push(ColdMetric { metric: metric.to_string(), first: *first, median_others });
        }
    }
    // The most striking first: the largest ratio.
    metrics.sort_by(|a, b| (b.first / b.median_others).total_cmp(&(a.first / a.median_others)));
    let top = metrics.first()?;
    let also: Vec<String> = metrics[1..].iter().map(|m| metric_words(&m.metric)).collect();
    let also = if also.is_empty() { String::new() } else { format!(" (also {})", also.join(", ")) };
    let note = format!(
        "trial 1 looks like a cold start: {} {} ms against a median of {} ms of the others{also}; \
         rerun with --warmup-trials 1",
        metric_words(&top.metric),
        round_ms(top.first),
        round_ms(top.median_others),
    );
    Some(ColdStart { metrics, note })
}

/// Milliseconds in a note: whole above 100, else 3 significant digits.
fn round_ms(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A metric over a set: each trial's value (blank when not measured) and the estimate, or
/// why there is none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricEstimate {
    pub per_trial: Vec<Option<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<Estimate>,
    /// Why `estimate` is blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blank: Option<String>,
}

impl MetricEstimate {
    /// No estimate, and why.
    pub fn blank(per_trial: Vec<Option<f64>>, why: impl Into<String>) -> MetricEstimate {
        MetricEstimate { per_trial, estimate: None, blank: Some(why.into()) }
    }
}

/// How a trial differs from the set's first: the trials' directory names, the key and both
/// values.
#[derive(Debug)]
pub struct MixedTrial {
    pub first: String,
    pub trial: String,
    pub key: String,
    pub found: String,
    pub expected: String,
}

/// Why a trial set cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TrialsError {
    /// `trials.json` or a trial's `summary.json` cannot be read (the error names the file).
    #[error(transparent)]
    File(#[from] crate::artifact::ArtifactError),
    #[error("trial {dir} of {}", set.display())]
    Trial {
        set: PathBuf,
        dir: String,
        #[source]
        source: Box<crate::artifact::ArtifactError>,
    },
    #[error("{} lists no trial: nothing was measured", path.display())]
    Empty { path: PathBuf },
    #[error(
        "trial {} of {} was measured otherwise than trial {}: {} {} against {}; every trial of a \
         set shares its profile, scenario, engine config and workload files",
        d.trial,
        path.display(),
        d.first,
        d.key,
        d.found,
        d.expected
    )]
    Mixed { path: PathBuf, d: Box<MixedTrial> },
    #[error(
        "{} holds trial directories ({}) but no {TRIALS_FILE}: a trial set lists its trials \
         there (it was deleted or never written); gate a trial's directory, or measure the set \
         again",
        path.display(),
        dirs.join(", ")
    )]
    NoIndex { path: PathBuf, dirs: Vec<String> },
}

impl crate::artifact::Artifact for TrialsFile {
    const FILE: &'static str = TRIALS_FILE;
    const VERSION: u32 = FORMAT_VERSION;
    const WHAT: &'static str = "a trial set index";
}

impl TrialsFile {
    /// `trials.json` of the set in `dir`.
    pub fn read(dir: &Path) -> Result<TrialsFile, TrialsError> {
        Ok(crate::artifact::read(&dir.join(TRIALS_FILE))?)
    }

    /// Write `trials.json` into `dir` atomically.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, crate::artifact::ArtifactError> {
        crate::artifact::write(dir, self)
    }
}

/// The keys every trial of a set must share, with their values: the profile, its resolved
/// settings (the scenario; the per-trial noise seed and the set's warmup trials left out), the
/// engine config's parameters and the hash of every workload file.
pub(crate) fn measurement_keys(s: &Summary) -> BTreeMap<String, serde_json::Value> {
    use serde_json::Value;
    let mut out = BTreeMap::new();
    out.insert("profile".to_string(), Value::String(s.profile.clone()));
    let per_trial = ["load.warmup_trials", "sim.noise.seed"];
    for (k, v) in crate::summary::flatten_params(&s.config.to_json()) {
        if !per_trial.contains(&k.as_str()) {
            out.insert(format!("config {k}"), v);
        }
    }
    if let Some(e) = &s.engine {
        for (k, v) in crate::summary::flatten_params(&e.params) {
            out.insert(format!("engine config {k}"), v);
        }
    }
    for f in &s.workload.files {
        out.insert(
            format!("workload file {}", f.path),
            serde_json::to_value(&f.hash).unwrap_or_default(),
        );
    }
    out
}

/// The first key of [`measurement_keys`] where `b` differs from `a`: the key, `b`'s value and
/// `a`'s (`(unset)` where one has none).
pub fn measurement_difference(a: &Summary, b: &Summary) -> Option<(String, String, String)> {
    let (ka, kb) = (measurement_keys(a), measurement_keys(b));
    let show = |m: &BTreeMap<String, serde_json::Value>, k: &str| match m.get(k) {
        None => "(unset)".to_string(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    };
    let key = ka.keys().chain(kb.keys()).find(|k| ka.get(*k) != kb.get(*k))?;
    Some((key.clone(), show(&kb, key), show(&ka, key)))
}

/// Refuse a trial measured otherwise than the set's first.
fn same_measurement(path: &Path, first: &Trial, t: &Trial) -> Result<(), TrialsError> {
    let Some((key, found, expected)) = measurement_difference(&first.summary, &t.summary) else {
        return Ok(());
    };
    let name = |t: &Trial| t.dir.file_name().map_or(String::new(), |n| n.to_string_lossy().into());
    let d = Box::new(MixedTrial { first: name(first), trial: name(t), key, found, expected });
    Err(TrialsError::Mixed { path: path.to_path_buf(), d })
}

/// The `trial-NN` directories of `dir`, sorted.
fn trial_dirs(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| {
            n.strip_prefix("trial-")
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    out.sort();
    out
}

/// What makes a set incomplete: each trial whose files disagree with its summary
/// ([`rundir::disagreements`]: `requests.jsonl` missing or cut, counts, last request,
/// histogram log), and each trial directory in `path` that `index` does not list.
pub fn integrity(path: &Path, index: &TrialsFile, trials: &[Trial]) -> Vec<String> {
    let mut out = Vec::new();
    for (entry, t) in index.trials.iter().zip(trials) {
        for p in rundir::disagreements(&t.dir, &t.summary) {
            out.push(format!("{}: {p}", entry.dir));
        }
    }
    let listed: Vec<&str> = index.trials.iter().map(|t| t.dir.as_str()).collect();
    for extra in trial_dirs(path).into_iter().filter(|d| !listed.contains(&d.as_str())) {
        out.push(format!(
            "{extra} is a trial directory {TRIALS_FILE} does not list (a trial that did not \
             finish, or one copied in): it is not part of the set"
        ));
    }
    out
}

/// Whether `path` is a trial set's directory.
pub fn is_trial_set(path: &Path) -> bool {
    path.join(TRIALS_FILE).is_file()
}

impl TrialSet {
    /// A trial set's directory (with `trials.json`), or a run directory or summary.json (a
    /// set of one).
    pub fn load(path: &Path) -> Result<TrialSet, TrialsError> {
        if !is_trial_set(path) {
            let dirs = trial_dirs(path);
            if !dirs.is_empty() && !path.join(rundir::SUMMARY_FILE).exists() {
                return Err(TrialsError::NoIndex { path: path.to_path_buf(), dirs });
            }
            let summary = Summary::read(path)?;
            let dir = if path.is_dir() {
                path.to_path_buf()
            } else {
                path.parent().map(Path::to_path_buf).unwrap_or_default()
            };
            return Ok(TrialSet {
                dir: dir.clone(),
                trials: vec![Trial { dir, summary }],
                index: None,
                problems: Vec::new(),
            });
        }
        TrialSet::with_index(path, TrialsFile::read(path)?)
    }

    /// The set of `index` (already read, or being written) in `path`.
    pub fn with_index(path: &Path, index: TrialsFile) -> Result<TrialSet, TrialsError> {
        if index.trials.is_empty() {
            return Err(TrialsError::Empty { path: path.join(TRIALS_FILE) });
        }
        let mut trials = Vec::new();
        for t in &index.trials {
            let dir = path.join(&t.dir);
            let summary = Summary::read(&dir).map_err(|source| TrialsError::Trial {
                set: path.to_path_buf(),
                dir: t.dir.clone(),
                source: Box::new(source),
            })?;
            if let Some(first) = trials.first() {
                same_measurement(
                    path,
                    first,
                    &Trial { dir: dir.clone(), summary: summary.clone() },
                )?;
            }
            trials.push(Trial { dir, summary });
        }
        let problems = integrity(path, &index, &trials);
        Ok(TrialSet { dir: path.to_path_buf(), trials, index: Some(index), problems })
    }

    /// A set from summaries already in memory (a run just measured); `dir` is where their
    /// records are for a single trial's request bootstrap.
    pub fn from_trials(dir: PathBuf, trials: Vec<Trial>) -> TrialSet {
        TrialSet { dir, trials, index: None, problems: Vec::new() }
    }

    /// The profile the trials measured.
    pub fn profile(&self) -> &str {
        self.trials.first().map_or("", |t| t.summary.profile.as_str())
    }

    /// Measured requests over all trials.
    pub fn requests(&self) -> u64 {
        self.trials.iter().map(|t| t.summary.requests.total).sum()
    }

    /// Each trial's value of `metric` (blank where not measured).
    pub fn per_trial(&self, metric: &str) -> Vec<Option<f64>> {
        self.trials.iter().map(|t| t.summary.metric(metric)).collect()
    }

    /// Whether trial 1 looks like a cold start in any latency metric of `metrics`
    /// ([`cold_start`]).
    pub fn cold_start(&self, metrics: &[&str]) -> Option<ColdStart> {
        let values: Vec<(&str, Vec<Option<f64>>)> =
            metrics.iter().map(|&m| (m, self.per_trial(m))).collect();
        cold_start(values.iter().map(|(m, v)| (*m, v.as_slice())))
    }

    /// The estimate of each of `metrics` (see the module's documentation). A single trial's
    /// records are read once for all of them.
    pub fn estimates(&self, metrics: &[&str], opts: Options) -> BTreeMap<String, MetricEstimate> {
        let mut out = BTreeMap::new();
        let mut from_records = Vec::new();
        for &m in metrics {
            let per_trial = self.per_trial(m);
            match self.estimate_without_records(m, per_trial, opts) {
                Ok(e) => {
                    out.insert(m.to_string(), e);
                }
                Err(per_trial) => from_records.push((m, per_trial)),
            }
        }
        if from_records.is_empty() {
            return out;
        }
        let trial = &self.trials[0];
        let names: Vec<&str> = from_records.iter().map(|(m, _)| *m).collect();
        match request_bootstrap(trial, &names, opts) {
            Ok(mut intervals) => {
                for (m, per_trial) in from_records {
                    let e = match intervals.remove(m) {
                        Some(Ok(e)) => MetricEstimate { per_trial, estimate: Some(e), blank: None },
                        Some(Err(why)) => MetricEstimate::blank(per_trial, why),
                        None => MetricEstimate::blank(per_trial, "not measured"),
                    };
                    out.insert(m.to_string(), e);
                }
            }
            Err(why) => {
                for (m, per_trial) in from_records {
                    out.insert(m.to_string(), MetricEstimate::blank(per_trial, why.clone()));
                }
            }
        }
        out
    }

    /// One metric's estimate.
    pub fn estimate(&self, metric: &str, opts: Options) -> MetricEstimate {
        self.estimates(&[metric], opts).remove(metric).expect("asked for")
    }

    /// The estimate when it needs no records (`Err` hands the values back when it does: one
    /// trial of a record metric).
    fn estimate_without_records(
        &self,
        metric: &str,
        per_trial: Vec<Option<f64>>,
        opts: Options,
    ) -> Result<MetricEstimate, Vec<Option<f64>>> {
        let Some(kind) = MetricKind::of(metric) else {
            return Ok(MetricEstimate::blank(per_trial, format!("unknown metric `{metric}`")));
        };
        let blanks: Vec<usize> =
            per_trial.iter().enumerate().filter(|(_, v)| v.is_none()).map(|(i, _)| i + 1).collect();
        if !blanks.is_empty() {
            let which: Vec<String> = blanks.iter().map(|i| i.to_string()).collect();
            let why = if blanks.len() == per_trial.len() {
                "not measured".to_string()
            } else {
                format!("not measured in trial {} of {}", which.join(", "), per_trial.len())
            };
            return Ok(MetricEstimate::blank(per_trial, why));
        }
        let values: Vec<f64> = per_trial.iter().map(|v| v.unwrap_or(f64::NAN)).collect();
        let requests = self.requests();
        let trials = values.len() as u64;
        let base = |value, lo, hi, method, undersampled| Estimate {
            value,
            lo,
            hi,
            confidence: opts.confidence,
            trials,
            requests,
            method,
            undersampled,
        };
        let undersampled = match kind {
            MetricKind::Records { tail: Some(tail) } => {
                let fewest = samples_path(metric)
                    .and_then(|p| {
                        self.trials.iter().map(|t| t.summary.metric(p).map(|n| n as u64)).min()?
                    })
                    .unwrap_or(0);
                tail_undersampled(tail, fewest)
            }
            _ => false,
        };
        match kind {
            MetricKind::Count => {
                let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let mean = values.iter().sum::<f64>() / values.len() as f64;
                let e = base(mean, lo, hi, Method::Observed, false);
                Ok(MetricEstimate { per_trial, estimate: Some(e), blank: None })
            }
            _ if values.len() >= 2 => match stats::t_interval(&values, opts.confidence) {
                Ok((value, lo, hi)) => {
                    let (lo, hi) = within_range(metric, lo, hi);
                    let e = base(value, lo, hi, Method::TInterval, undersampled);
                    Ok(MetricEstimate { per_trial, estimate: Some(e), blank: None })
                }
                Err(e) => Ok(MetricEstimate::blank(per_trial, e.to_string())),
            },
            MetricKind::Summary => Ok(MetricEstimate::blank(
                per_trial,
                "one run, and the metric does not come from the request records: measure \
                 trials for an interval",
            )),
            MetricKind::Records { .. } => Err(per_trial),
        }
    }
}

/// The replicates are drawn in this many chunks, each from its own seeded generator, so the
/// result is the same however many threads compute them.
const BOOTSTRAP_CHUNKS: u32 = 16;

/// Every replicate's value of each of `metrics`: `opts.resamples` draws of `records` with
/// replacement, each through a fresh accumulator with the run's SLO. The chunks run on the
/// machine's threads; the summary each replicate is read through is the run's without its
/// configuration, notes and extra sections (serialised once per replicate).
fn bootstrap_replicates<'m>(
    summary: &Summary,
    records: &[RequestRecord],
    slo: &Slo,
    metrics: &[&'m str],
    opts: Options,
) -> BTreeMap<&'m str, Vec<f64>> {
    // A plateau's figures resample the records sent within it (`steady::measure`), the
    // others every measured record.
    let on_plateau = |m: &str| crate::summary::metric_def(m).is_some_and(|d| d.plateau);
    let whole = metrics.iter().any(|m| !on_plateau(m));
    let bounds = summary.plateau.as_ref().and_then(|p| {
        Some(crate::steady::Bounds {
            start_ms: p.start_ms?,
            end_ms: p.end_ms?,
            slice_ms: p.slice_ms.unwrap_or(0.0),
            unsteady_slices: p.unsteady_slices,
        })
    });
    let within: Vec<&RequestRecord> = match (&bounds, metrics.iter().any(|m| on_plateau(m))) {
        (Some(b), true) => records
            .iter()
            .filter(|r| r.intended_ms >= b.start_ms && r.intended_ms < b.end_ms)
            .collect(),
        _ => Vec::new(),
    };
    let mut slim = summary.clone();
    slim.config = crate::summary::RunConfig::Profile(Box::default());
    slim.extra = Default::default();
    slim.notes.clear();
    slim.server = None;
    let chunk = |c: u32| {
        let n =
            opts.resamples / BOOTSTRAP_CHUNKS + u32::from(c < opts.resamples % BOOTSTRAP_CHUNKS);
        let mut rng = StdRng::seed_from_u64(opts.seed ^ (u64::from(c) << 32));
        let mut summary = slim.clone();
        let mut out: BTreeMap<&'m str, Vec<f64>> = BTreeMap::new();
        for _ in 0..n {
            if whole {
                let mut acc = MetricsAccumulator::new(slo.clone());
                for _ in 0..records.len() {
                    acc.add(&records[rng.random_range(0..records.len())]);
                }
                summary.set_metrics(acc.finish(None));
            }
            if let (Some(b), false) = (&bounds, within.is_empty()) {
                let draw = (0..within.len()).map(|_| within[rng.random_range(0..within.len())]);
                summary.plateau = Some(crate::steady::measure(draw, b, slo));
            }
            let json = serde_json::to_value(&summary).expect("a summary serialises");
            for &m in metrics {
                let v = match m {
                    "error_rate" => (summary.requests.total > 0)
                        .then(|| summary.requests.failed as f64 / summary.requests.total as f64),
                    _ => crate::summary::lookup_path(&json, m),
                };
                if let Some(v) = v.filter(|v| v.is_finite()) {
                    out.entry(m).or_default().push(v);
                }
            }
        }
        out
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 16) as u32;
    let mut per_chunk: Vec<BTreeMap<&'m str, Vec<f64>>> = Vec::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let chunk = &chunk;
                scope.spawn(move || {
                    (t..BOOTSTRAP_CHUNKS)
                        .step_by(threads as usize)
                        .map(|c| (c, chunk(c)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<(u32, BTreeMap<&'m str, Vec<f64>>)> =
            handles.into_iter().flat_map(|h| h.join().expect("a bootstrap thread")).collect();
        all.sort_by_key(|(c, _)| *c);
        per_chunk = all.into_iter().map(|(_, m)| m).collect();
    });
    let mut replicates: BTreeMap<&'m str, Vec<f64>> = BTreeMap::new();
    for m in per_chunk {
        for (k, v) in m {
            replicates.entry(k).or_default().extend(v);
        }
    }
    replicates
}

/// Metrics that are shares: their values lie within 0..=1.
const SHARES: [&str; 6] = [
    "goodput.ratio",
    "plateau.goodput.ratio",
    "error_rate",
    "server.goodput_ratio",
    "server.kv_cache_usage.max",
    "server.prefix_cache_hit_rate",
];

/// A t interval cut to the values the metric can take: every known metric is at least 0
/// (latencies, rates, counts, costs), a share at most 1. Cutting an interval to the metric's
/// range keeps every value it could be, so the coverage does not drop.
fn within_range(metric: &str, lo: f64, hi: f64) -> (f64, f64) {
    let lo = lo.max(0.0);
    let hi = if SHARES.contains(&metric) { hi.min(1.0) } else { hi };
    (lo, hi.max(lo))
}

/// Per metric, the request bootstrap of one trial: the interval, or why there is none.
type Intervals = BTreeMap<String, Result<Estimate, String>>;

/// The request bootstrap of one trial for `metrics` (all computed from records): each
/// replicate draws the trial's measured records with replacement and computes the summary
/// from them with the run's own accumulator and SLO.
fn request_bootstrap(trial: &Trial, metrics: &[&str], opts: Options) -> Result<Intervals, String> {
    if !trial.dir.join(REQUESTS_FILE).is_file() {
        return Err(format!("one run without its {REQUESTS_FILE}: no request-level interval"));
    }
    let read = rundir::read_records(&trial.dir).map_err(|e| {
        let why = match &e {
            rundir::RunDirError::Read { source, .. } => source.to_string(),
            rundir::RunDirError::BadRecord { line, message, .. } => {
                format!("line {line}: {message}")
            }
            other => other.to_string(),
        };
        format!("one run whose {REQUESTS_FILE} cannot be read ({why}): no request-level interval")
    })?;
    let records: Vec<RequestRecord> = read.records.into_iter().filter(|r| !r.warmup).collect();
    if records.is_empty() {
        return Err("one trial with no measured request".to_string());
    }
    let slo: Slo = trial.summary.config.profile().map(|p| p.slo.clone()).unwrap_or_default();
    let replicates = bootstrap_replicates(&trial.summary, &records, &slo, metrics, opts);
    let n = records.len() as u64;
    let mut out = BTreeMap::new();
    for &m in metrics {
        let Some(value) = trial.summary.metric(m) else {
            out.insert(m.to_string(), Err("not measured".to_string()));
            continue;
        };
        let reps = replicates.get(m).cloned().unwrap_or_default();
        // A statistic blank in more than 1% of the replicates (too few ok requests to draw
        // from) has no interval.
        if (reps.len() as f64) < 0.99 * opts.resamples as f64 {
            out.insert(
                m.to_string(),
                Err(format!(
                    "too few measured samples for a request-level interval ({} of {} resamples \
                     had a value)",
                    reps.len(),
                    opts.resamples
                )),
            );
            continue;
        }
        let mut reps = reps;
        let tail = (1.0 - opts.confidence) / 2.0;
        let lo = stats::quantile_in_place(&mut reps, tail).unwrap_or(f64::NAN);
        let hi = stats::quantile_in_place(&mut reps, 1.0 - tail).unwrap_or(f64::NAN);
        let undersampled = match MetricKind::of(m) {
            Some(MetricKind::Records { tail: Some(t) }) => {
                let samples =
                    samples_path(m).and_then(|p| trial.summary.metric(p)).map_or(0, |c| c as u64);
                tail_undersampled(t, samples)
            }
            _ => false,
        };
        out.insert(
            m.to_string(),
            Ok(Estimate {
                // The summary's value; the interval never leaves it out.
                value,
                lo: lo.min(value),
                hi: hi.max(value),
                confidence: opts.confidence,
                trials: 1,
                requests: n,
                method: Method::RequestBootstrap,
                undersampled,
            }),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Outcome;
    use crate::summary::{RunHeader, TargetInfo, WorkloadInfo};

    /// A request whose TTFT is `ttft` ms, with 4 output tokens 10 ms apart.
    fn rec(id: u64, ttft: f64, ok: bool) -> RequestRecord {
        let t0 = id as f64 * 100.0;
        let r = if ok {
            RequestRecord::ok(id, t0, t0 + ttft, vec![10.0; 3])
        } else {
            RequestRecord::failed(id, t0, Outcome::Http(500), Some(500), t0 + ttft + 31.0)
        };
        RequestRecord { input_tokens: Some(3), ..r }
    }

    /// A run directory holding `records` and their summary.
    fn run(dir: &Path, profile: &str, records: &[RequestRecord]) -> Summary {
        std::fs::create_dir_all(dir).unwrap();
        let mut w = rundir::RecordWriter::create(dir).unwrap();
        let mut acc = MetricsAccumulator::new(Slo::default());
        for r in records {
            w.write(r).unwrap();
            acc.add(r);
        }
        w.finish().unwrap();
        let header = RunHeader {
            run_id: dir.file_name().unwrap().to_string_lossy().into(),
            simulated: true,
            git: None,
            target: TargetInfo::default(),
            config: crate::summary::RunConfig::Profile(Box::default()),
            profile: profile.into(),
            engine: None,
            started_at: chrono::Utc::now(),
            workload: WorkloadInfo::default(),
            notes: vec![],
        };
        let summary = Summary::of_run(header, acc.finish(None));
        rundir::write_summary(dir, &summary).unwrap();
        summary
    }

    /// A trial set in `dir` with one trial per TTFT list.
    fn set(dir: &Path, ttfts: &[&[f64]]) {
        let mut entries = Vec::new();
        for (i, ttft) in ttfts.iter().enumerate() {
            let name = format!("trial-{:02}", i + 1);
            let records: Vec<_> =
                ttft.iter().enumerate().map(|(j, &t)| rec(j as u64, t, true)).collect();
            let s = run(&dir.join(&name), "default", &records);
            entries.push(TrialEntry {
                dir: name,
                run_id: s.run_id,
                status: s.status,
                requests: s.requests.total,
                ok: s.requests.ok,
                host_busy: false,
                headline: BTreeMap::new(),
            });
        }
        let file = TrialsFile {
            format_version: FORMAT_VERSION,
            run_id: "set".into(),
            bench_args: vec![],
            profile: "default".into(),
            planned: ttfts.len() as u32,
            cooldown_s: 0.0,
            confidence: 0.95,
            trials: entries,
            metrics: BTreeMap::new(),
            notes: vec![],
            warmup: vec![],
            cold_start: None,
        };
        file.write(dir).unwrap();
    }

    #[test]
    fn metric_kinds_follow_the_registry() {
        assert_eq!(MetricKind::of("requests.failed"), Some(MetricKind::Count));
        assert_eq!(MetricKind::of("server.preemptions"), Some(MetricKind::Count));
        assert_eq!(
            MetricKind::of("metrics.ttft_ms.p99"),
            Some(MetricKind::Records { tail: Some(0.01) })
        );
        assert_eq!(
            MetricKind::of("metrics.tpot_ms.mean"),
            Some(MetricKind::Records { tail: None })
        );
        assert_eq!(MetricKind::of("error_rate"), Some(MetricKind::Records { tail: None }));
        assert_eq!(
            MetricKind::of("throughput.output_tokens_per_s"),
            Some(MetricKind::Records { tail: None })
        );
        assert_eq!(MetricKind::of("server.goodput_ratio"), Some(MetricKind::Summary));
        assert_eq!(MetricKind::of("cost.per_request"), Some(MetricKind::Summary));
        assert_eq!(MetricKind::of("metrics.nope"), None);
        assert!(tail_undersampled(0.01, 99) && !tail_undersampled(0.01, 100));
        assert!(tail_undersampled(0.0, 1_000_000), "the maximum is never a stable estimate");
    }

    #[test]
    fn several_trials_give_the_t_interval_of_their_values() {
        let tmp = tempfile::tempdir().unwrap();
        // Three trials of 200 requests, every TTFT 100, 110 and 120 ms.
        let trials: Vec<Vec<f64>> = [100.0, 110.0, 120.0].iter().map(|&t| vec![t; 200]).collect();
        let refs: Vec<&[f64]> = trials.iter().map(Vec::as_slice).collect();
        set(tmp.path(), &refs);
        let set = TrialSet::load(tmp.path()).unwrap();
        assert_eq!((set.trials.len(), set.requests(), set.profile()), (3, 600, "default"));
        let m = set.estimate("metrics.ttft_ms.mean", Options::default());
        assert_eq!(m.per_trial, vec![Some(100.0), Some(110.0), Some(120.0)]);
        let e = m.estimate.unwrap();
        // mean 110, s = 10, n = 3: half width t(0.975, 2) x 10 / sqrt(3) = 24.84138.
        assert_eq!((e.method, e.trials, e.requests), (Method::TInterval, 3, 600));
        assert!((e.value - 110.0).abs() < 1e-9 && (e.hi - 134.84138).abs() < 1e-4, "{e}");
        // An interval is cut to the metric's range: a share of 0.9, 0.97 and 1.0 (t interval
        // [0.80, 1.11]) ends at 1; a latency interval never goes below 0.
        assert_eq!(within_range("goodput.ratio", 0.80, 1.11), (0.80, 1.0));
        assert_eq!(within_range("metrics.ttft_ms.mean", -48.0, 2467.0), (0.0, 2467.0));
        assert_eq!(within_range("metrics.itl_jitter", 0.5, 1.3), (0.5, 1.3));
        // 200 requests a trial are enough for a P99, too few for a P99.9.
        let p99 = set.estimate("metrics.ttft_ms.p99", Options::default()).estimate.unwrap();
        assert!(!p99.undersampled, "{p99}");
        let p999 = set.estimate("metrics.ttft_ms.p999", Options::default()).estimate.unwrap();
        assert!(p999.undersampled, "{p999}");
        // Counts are observed, not estimated.
        let failed = set.estimate("requests.failed", Options::default()).estimate.unwrap();
        assert_eq!((failed.method, failed.lo, failed.hi), (Method::Observed, 0.0, 0.0));
        // A metric no trial measured is blank, with the reason.
        let server = set.estimate("server.goodput_ratio", Options::default());
        assert_eq!(server.blank.as_deref(), Some("not measured"));
    }

    #[test]
    fn one_run_gets_the_request_bootstrap_through_the_run_s_own_metrics() {
        let tmp = tempfile::tempdir().unwrap();
        // 300 requests: TTFT 100 + (i mod 10) ms, one in ten failed.
        let records: Vec<_> =
            (0..300).map(|i| rec(i, 100.0 + (i % 10) as f64, i % 10 != 9)).collect();
        let dir = tmp.path().join("run");
        let mut summary = run(&dir, "default", &records);
        summary.server = Some(crate::server_metrics::ServerSection {
            goodput_ratio: Some(0.9),
            ..Default::default()
        });
        rundir::write_summary(&dir, &summary).unwrap();
        let set = TrialSet::load(&dir).unwrap();
        assert!(set.index.is_none() && set.trials.len() == 1);
        let metrics =
            ["metrics.ttft_ms.mean", "error_rate", "server.goodput_ratio", "cost.per_request"];
        let est = set.estimates(&metrics, Options { resamples: 400, ..Options::default() });
        let mean = est["metrics.ttft_ms.mean"].estimate.clone().unwrap();
        assert_eq!(mean.method, Method::RequestBootstrap);
        assert_eq!(mean.value, summary.metric("metrics.ttft_ms.mean").unwrap());
        // ok TTFTs 100..=108, sd 2.58 over 270: se 0.157, the interval about ±0.31.
        assert!(mean.lo < mean.value && mean.hi > mean.value, "{mean}");
        assert!(mean.hi - mean.lo > 0.4 && mean.hi - mean.lo < 0.9, "{mean}");
        // The error rate 0.1 over 300 requests: se 0.0173, about ±0.034.
        let err = est["error_rate"].estimate.clone().unwrap();
        assert!((err.value - 0.1).abs() < 1e-12, "{err}");
        assert!(err.lo > 0.05 && err.lo < 0.08 && err.hi > 0.12 && err.hi < 0.15, "{err}");
        // Not from the records: no interval from one trial, and it says so.
        let server = &est["server.goodput_ratio"];
        assert_eq!(server.per_trial, vec![Some(0.9)]);
        assert!(server.estimate.is_none());
        assert!(server.blank.as_deref().unwrap().contains("measure trials"), "{server:?}");
        assert_eq!(est["cost.per_request"].blank.as_deref(), Some("not measured"));
        // Seeded: the same run gives the same interval.
        let again = set.estimates(&metrics, Options { resamples: 400, ..Options::default() });
        assert_eq!(again, est);
        // Without its records, a single run has no request-level interval, and says why.
        std::fs::remove_file(dir.join(REQUESTS_FILE)).unwrap();
        let m = TrialSet::load(&dir).unwrap().estimate("metrics.ttft_ms.mean", Options::default());
        assert!(m.estimate.is_none());
        assert_eq!(
            m.blank.as_deref(),
            Some("one run without its requests.jsonl: no request-level interval")
        );
        std::fs::write(dir.join(REQUESTS_FILE), "{\"id\": 1}\n{}\n").unwrap();
        let m = TrialSet::load(&dir).unwrap().estimate("metrics.ttft_ms.mean", Options::default());
        assert!(
            m.blank.unwrap().starts_with("one run whose requests.jsonl cannot be read (line 1: ")
        );
    }

    #[test]
    fn broken_sets_are_errors_that_name_the_trial() {
        let tmp = tempfile::tempdir().unwrap();
        set(tmp.path(), &[&[100.0; 5], &[100.0; 5]]);
        std::fs::remove_file(tmp.path().join("trial-02").join("summary.json")).unwrap();
        let e = TrialSet::load(tmp.path()).unwrap_err();
        assert!(e.to_string().starts_with("trial trial-02 of "), "{e}");

        let tmp = tempfile::tempdir().unwrap();
        set(tmp.path(), &[&[100.0; 5]]);
        run(&tmp.path().join("trial-02"), "other", &[rec(0, 1.0, true)]);
        let mut index = TrialsFile::read(tmp.path()).unwrap();
        let mut second = index.trials[0].clone();
        second.dir = "trial-02".into();
        index.trials.push(second);
        index.write(tmp.path()).unwrap();
        let e = TrialSet::load(tmp.path()).unwrap_err();
        assert!(
            e.to_string().contains("trial trial-02 of")
                && e.to_string().contains(": profile other against default"),
            "{e}"
        );

        index.format_version = 9;
        index.write(tmp.path()).unwrap();
        let e = TrialSet::load(tmp.path()).unwrap_err();
        assert!(
            e.to_string().ends_with(
                "trials.json is a trial set index of format 9, this tool reads format 1"
            ),
            "{e}"
        );
        index.format_version = FORMAT_VERSION;
        index.trials.clear();
        index.write(tmp.path()).unwrap();
        let e = TrialSet::load(tmp.path()).unwrap_err();
        assert!(e.to_string().contains("lists no trial"), "{e}");
    }

    #[test]
    fn a_slow_first_trial_is_a_cold_start_and_similar_trials_are_not() {
        // The llama.cpp set of docs/walkthrough.md: trial 1 at 1214 ms, the others near 190.
        let ttft = [Some(1214.0), Some(196.0), Some(188.0), Some(201.0)];
        let tpot = [Some(9.1), Some(9.0), Some(9.2), Some(9.0)];
        let thr = [Some(10.0), Some(100.0), Some(100.0), Some(100.0)];
        let c = cold_start([
            ("metrics.ttft_ms.p99", &ttft[..]),
            ("metrics.tpot_ms.mean", &tpot[..]),
            ("throughput.output_tokens_per_s", &thr[..]),
        ])
        .unwrap();
        assert_eq!(
            c.metrics,
            vec![ColdMetric {
                metric: "metrics.ttft_ms.p99".into(),
                first: 1214.0,
                median_others: 196.0
            }]
        );
        assert_eq!(
            c.note,
            "trial 1 looks like a cold start: TTFT P99 1214 ms against a median of 196 ms of the \
             others; rerun with --warmup-trials 1"
        );
        // Not latency (a slow throughput), or not an outlier: nothing to say.
        assert_eq!(cold_start([("throughput.output_tokens_per_s", &thr[..])]), None);
        assert_eq!(cold_start([("metrics.tpot_ms.mean", &tpot[..])]), None);
        // Both halves of the rule: 1.5x the median, and 5 scaled MADs above it.
        assert_eq!(is_cold(301.0, &[200.0, 200.0]), Some(200.0), "identical others: ratio alone");
        assert_eq!(is_cold(299.0, &[200.0, 200.0]), None, "under 1.5x");
        // Others 100 and 200: median 150, MAD 50, 5 x 1.4826 x 50 = 370.65 above it.
        assert_eq!(is_cold(500.0, &[100.0, 200.0]), None, "1.5x but within the spread");
        assert_eq!(is_cold(521.0, &[100.0, 200.0]), Some(150.0));
        // Two trials (one other) are too few; a blank value in the set is no evidence.
        assert_eq!(is_cold(1000.0, &[100.0]), None);
        let blank = [Some(1214.0), None, Some(190.0)];
        assert_eq!(cold_start([("metrics.ttft_ms.p99", &blank[..])]), None);
        // Several metrics: the largest ratio leads, the others are named.
        let e2e = [Some(3000.0), Some(1000.0), Some(1000.0)];
        let ttft = [Some(1214.0), Some(196.0), Some(196.0)];
        let c = cold_start([("metrics.e2e_ms.p99", &e2e[..]), ("metrics.ttft_ms.p99", &ttft[..])])
            .unwrap();
        assert!(
            c.note.starts_with("trial 1 looks like a cold start: TTFT P99 1214 ms"),
            "{}",
            c.note
        );
        assert!(c.note.contains("others (also E2E P99); rerun"), "{}", c.note);
    }

    #[test]
    fn warmup_trials_are_listed_but_never_read_into_the_set() {
        let tmp = tempfile::tempdir().unwrap();
        // Trials at 100, 110, 120 ms; a warmup trial at 5000 ms beside them.
        let trials: Vec<Vec<f64>> = [100.0, 110.0, 120.0].iter().map(|&t| vec![t; 200]).collect();
        let refs: Vec<&[f64]> = trials.iter().map(Vec::as_slice).collect();
        set(tmp.path(), &refs);
        let s = run(&tmp.path().join("warmup-01"), "default", &vec![rec(0, 5000.0, true); 200]);
        let mut index = TrialsFile::read(tmp.path()).unwrap();
        let headline: BTreeMap<String, Option<f64>> =
            HEADLINE_METRICS.iter().map(|m| (m.to_string(), s.metric(m))).collect();
        index.warmup.push(TrialEntry {
            dir: "warmup-01".into(),
            run_id: s.run_id.clone(),
            status: s.status,
            requests: 200,
            ok: 200,
            host_busy: false,
            headline,
        });
        index.write(tmp.path()).unwrap();
        let back = TrialsFile::read(tmp.path()).unwrap();
        assert_eq!(back.warmup[0].headline["metrics.ttft_ms.p99"], Some(5000.0));
        let set = TrialSet::load(tmp.path()).unwrap();
        assert_eq!((set.trials.len(), set.requests()), (3, 600));
        let m = set.estimate("metrics.ttft_ms.mean", Options::default());
        assert_eq!(m.per_trial, vec![Some(100.0), Some(110.0), Some(120.0)]);
        assert_eq!(set.cold_start(&["metrics.ttft_ms.mean"]), None);
    }
}
