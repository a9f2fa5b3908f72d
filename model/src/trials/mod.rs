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
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

/// How a metric's interval is computed: where its samples come from, as the registry says.
pub use crate::metric::MetricKind;
use crate::metric::{MetricPath, Reading};
use crate::metrics::{MetricsAccumulator, Slo};
use crate::record::RequestRecord;
use crate::rundir::{self, REQUESTS_FILE};
use crate::stats::{self, Estimate, Method, Options};
use crate::summary::{RunStatus, Summary};

mod cold;
mod estimate;
mod file;
mod request;

pub use cold::*;
pub use estimate::*;
pub use file::*;
pub use request::*;

/// The trial set's index, in the set's directory.
pub const TRIALS_FILE: &str = "trials.json";
/// The `format_version` of `trials.json` this tool writes and reads (format 1, which recorded
/// bench arguments as text in place of the typed request, is read too).
pub const FORMAT_VERSION: u32 = 2;

/// The metrics a trial set estimates besides those its thresholds name: TTFT, TPOT, ITL and
/// E2E mean and P99, throughput, goodput and the error rate.
pub fn default_metrics() -> &'static [MetricPath] {
    static ALL: LazyLock<Vec<MetricPath>> =
        LazyLock::new(|| DEFAULT_METRIC_PATHS.iter().map(|m| MetricPath::named(m)).collect());
    &ALL
}

const DEFAULT_METRIC_PATHS: &[&str] = &[
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

/// The metrics a warmup trial is listed with in `trials.json`.
pub fn headline_metrics() -> &'static [MetricPath] {
    static ALL: LazyLock<Vec<MetricPath>> =
        LazyLock::new(|| HEADLINE_METRIC_PATHS.iter().map(|m| MetricPath::named(m)).collect());
    &ALL
}

const HEADLINE_METRIC_PATHS: &[&str] = &[
    "metrics.ttft_ms.p99",
    "metrics.tpot_ms.p99",
    "metrics.e2e_ms.p99",
    "throughput.output_tokens_per_s",
    "error_rate",
];

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

impl TrialSet {
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
    pub fn per_trial(&self, metric: MetricPath) -> Vec<Option<f64>> {
        self.trials.iter().map(|t| t.summary.metric(metric)).collect()
    }

    /// Whether trial 1 looks like a cold start in any latency metric of `metrics`
    /// ([`cold_start`]).
    pub fn cold_start(&self, metrics: &[MetricPath]) -> Option<ColdStart> {
        let values: Vec<(MetricPath, Vec<Option<f64>>)> =
            metrics.iter().map(|&m| (m, self.per_trial(m))).collect();
        cold_start(values.iter().map(|(m, v)| (*m, v.as_slice())))
    }
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
            request: None,
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
        let of = |m: &str| MetricPath::named(m).kind();
        assert_eq!(of("requests.failed"), MetricKind::Count);
        assert_eq!(of("server.preemptions"), MetricKind::Count);
        assert_eq!(of("metrics.ttft_ms.p99"), MetricKind::Records { tail: Some(0.01) });
        assert_eq!(of("metrics.tpot_ms.mean"), MetricKind::Records { tail: None });
        assert_eq!(of("error_rate"), MetricKind::Records { tail: None });
        assert_eq!(of("throughput.output_tokens_per_s"), MetricKind::Records { tail: None });
        assert_eq!(of("server.goodput_ratio"), MetricKind::Summary);
        assert_eq!(of("cost.per_request"), MetricKind::Summary);
        assert!(MetricPath::parse("metrics.nope").is_err());
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
        let m = set.estimate(MetricPath::named("metrics.ttft_ms.mean"), Options::default());
        assert_eq!(m.per_trial, vec![Some(100.0), Some(110.0), Some(120.0)]);
        let e = m.estimate.unwrap();
        // mean 110, s = 10, n = 3: half width t(0.975, 2) x 10 / sqrt(3) = 24.84138.
        assert_eq!((e.method, e.trials, e.requests), (Method::TInterval, 3, 600));
        assert!((e.value - 110.0).abs() < 1e-9 && (e.hi - 134.84138).abs() < 1e-4, "{e}");
        // An interval is cut to the metric's range: a share of 0.9, 0.97 and 1.0 (t interval
        // [0.80, 1.11]) ends at 1; a latency interval never goes below 0.
        assert_eq!(within_range(MetricPath::named("goodput.ratio"), 0.80, 1.11), (0.80, 1.0));
        assert_eq!(
            within_range(MetricPath::named("metrics.ttft_ms.mean"), -48.0, 2467.0),
            (0.0, 2467.0)
        );
        assert_eq!(within_range(MetricPath::named("metrics.itl_jitter"), 0.5, 1.3), (0.5, 1.3));
        // 200 requests a trial are enough for a P99, too few for a P99.9.
        let p99 = set
            .estimate(MetricPath::named("metrics.ttft_ms.p99"), Options::default())
            .estimate
            .unwrap();
        assert!(!p99.undersampled, "{p99}");
        let p999 = set
            .estimate(MetricPath::named("metrics.ttft_ms.p999"), Options::default())
            .estimate
            .unwrap();
        assert!(p999.undersampled, "{p999}");
        // Counts are observed, not estimated.
        let failed = set
            .estimate(MetricPath::named("requests.failed"), Options::default())
            .estimate
            .unwrap();
        assert_eq!((failed.method, failed.lo, failed.hi), (Method::Observed, 0.0, 0.0));
        // A metric no trial measured is blank, with the reason.
        let server = set.estimate(MetricPath::named("server.goodput_ratio"), Options::default());
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
            ["metrics.ttft_ms.mean", "error_rate", "server.goodput_ratio", "cost.per_request"]
                .map(MetricPath::named);
        let est = set.estimates(&metrics, Options { resamples: 400, ..Options::default() });
        let mean = est[&metrics[0]].estimate.clone().unwrap();
        assert_eq!(mean.method, Method::RequestBootstrap);
        assert_eq!(mean.value, summary.metric(MetricPath::named("metrics.ttft_ms.mean")).unwrap());
        // ok TTFTs 100..=108, sd 2.58 over 270: se 0.157, the interval about ±0.31.
        assert!(mean.lo < mean.value && mean.hi > mean.value, "{mean}");
        assert!(mean.hi - mean.lo > 0.4 && mean.hi - mean.lo < 0.9, "{mean}");
        // The error rate 0.1 over 300 requests: se 0.0173, about ±0.034.
        let err = est[&metrics[1]].estimate.clone().unwrap();
        assert!((err.value - 0.1).abs() < 1e-12, "{err}");
        assert!(err.lo > 0.05 && err.lo < 0.08 && err.hi > 0.12 && err.hi < 0.15, "{err}");
        // Not from the records: no interval from one trial, and it says so.
        let server = &est[&metrics[2]];
        assert_eq!(server.per_trial, vec![Some(0.9)]);
        assert!(server.estimate.is_none());
        assert!(server.blank.as_deref().unwrap().contains("measure trials"), "{server:?}");
        assert_eq!(est[&metrics[3]].blank.as_deref(), Some("not measured"));
        // Seeded: the same run gives the same interval.
        let again = set.estimates(&metrics, Options { resamples: 400, ..Options::default() });
        assert_eq!(again, est);
        // Without its records, a single run has no request-level interval, and says why.
        std::fs::remove_file(dir.join(REQUESTS_FILE)).unwrap();
        let m = TrialSet::load(&dir)
            .unwrap()
            .estimate(MetricPath::named("metrics.ttft_ms.mean"), Options::default());
        assert!(m.estimate.is_none());
        assert_eq!(
            m.blank.as_deref(),
            Some("one run without its requests.jsonl: no request-level interval")
        );
        std::fs::write(dir.join(REQUESTS_FILE), "{\"id\": 1}\n{}\n").unwrap();
        let m = TrialSet::load(&dir)
            .unwrap()
            .estimate(MetricPath::named("metrics.ttft_ms.mean"), Options::default());
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
                "trials.json is a trial set index of format 9, this tool reads format 2"
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
    fn a_set_of_format_1_reads_without_a_request() {
        let tmp = tempfile::tempdir().unwrap();
        set(tmp.path(), &[&[200.0; 4], &[210.0; 4]]);
        let mut doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(tmp.path().join(TRIALS_FILE)).unwrap())
                .unwrap();
        doc["format_version"] = 1.into();
        doc["bench_args"] = serde_json::json!(["--profile", "default", "--trials", "2"]);
        std::fs::write(tmp.path().join(TRIALS_FILE), doc.to_string()).unwrap();
        let index = TrialsFile::read(tmp.path()).unwrap();
        assert_eq!((index.format_version, index.request, index.trials.len()), (2, None, 2));
        assert_eq!(TrialSet::load(tmp.path()).unwrap().trials.len(), 2);
    }

    #[test]
    fn a_slow_first_trial_is_a_cold_start_and_similar_trials_are_not() {
        // The llama.cpp set of docs/walkthrough.md: trial 1 at 1214 ms, the others near 190.
        let ttft = [Some(1214.0), Some(196.0), Some(188.0), Some(201.0)];
        let tpot = [Some(9.1), Some(9.0), Some(9.2), Some(9.0)];
        let thr = [Some(10.0), Some(100.0), Some(100.0), Some(100.0)];
        let c = cold_start([
            (MetricPath::named("metrics.ttft_ms.p99"), &ttft[..]),
            (MetricPath::named("metrics.tpot_ms.mean"), &tpot[..]),
            (MetricPath::named("throughput.output_tokens_per_s"), &thr[..]),
        ])
        .unwrap();
        assert_eq!(
            c.metrics,
            vec![ColdMetric {
                metric: MetricPath::named("metrics.ttft_ms.p99"),
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
        assert_eq!(
            cold_start([(MetricPath::named("throughput.output_tokens_per_s"), &thr[..])]),
            None
        );
        assert_eq!(cold_start([(MetricPath::named("metrics.tpot_ms.mean"), &tpot[..])]), None);
        // Both halves of the rule: 1.5x the median, and 5 scaled MADs above it.
        assert_eq!(is_cold(301.0, &[200.0, 200.0]), Some(200.0), "identical others: ratio alone");
        assert_eq!(is_cold(299.0, &[200.0, 200.0]), None, "under 1.5x");
        // Others 100 and 200: median 150, MAD 50, 5 x 1.4826 x 50 = 370.65 above it.
        assert_eq!(is_cold(500.0, &[100.0, 200.0]), None, "1.5x but within the spread");
        assert_eq!(is_cold(521.0, &[100.0, 200.0]), Some(150.0));
        // Two trials (one other) are too few; a blank value in the set is no evidence.
        assert_eq!(is_cold(1000.0, &[100.0]), None);
        let blank = [Some(1214.0), None, Some(190.0)];
        assert_eq!(cold_start([(MetricPath::named("metrics.ttft_ms.p99"), &blank[..])]), None);
        // Several metrics: the largest ratio leads, the others are named.
        let e2e = [Some(3000.0), Some(1000.0), Some(1000.0)];
        let ttft = [Some(1214.0), Some(196.0), Some(196.0)];
        let c = cold_start([
            (MetricPath::named("metrics.e2e_ms.p99"), &e2e[..]),
            (MetricPath::named("metrics.ttft_ms.p99"), &ttft[..]),
        ])
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
            headline_metrics().iter().map(|&m| (m.to_string(), s.metric(m))).collect();
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
        let m = set.estimate(MetricPath::named("metrics.ttft_ms.mean"), Options::default());
        assert_eq!(m.per_trial, vec![Some(100.0), Some(110.0), Some(120.0)]);
        assert_eq!(set.cold_start(&[MetricPath::named("metrics.ttft_ms.mean")]), None);
    }
}
