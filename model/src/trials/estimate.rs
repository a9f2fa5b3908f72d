//! A metric's estimate over a set, by its kind: the t interval across trials, a single run's
//! request bootstrap (every replicate through the run's own metrics), observed counts, or a
//! blank that says why.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

/// The sample count behind `metric`'s statistic in `summary`, as the registry says where it is.
pub(super) fn samples_of(metric: MetricPath, summary: &Summary) -> Option<u64> {
    summary.value_of(metric.def().samples?).map(|n| n as u64)
}

/// Whether `n` samples are too few for a statistic with `tail` share beyond it.
pub(super) fn tail_undersampled(tail: f64, n: u64) -> bool {
    tail <= 0.0 || stats::undersampled(1.0 - tail, n)
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

impl TrialSet {
    /// The estimate of each of `metrics` (see the module's documentation). A single trial's
    /// records are read once for all of them.
    pub fn estimates(
        &self,
        metrics: &[MetricPath],
        opts: Options,
    ) -> BTreeMap<MetricPath, MetricEstimate> {
        let mut out = BTreeMap::new();
        let mut from_records = Vec::new();
        for &m in metrics {
            let per_trial = self.per_trial(m);
            match self.estimate_without_records(m, per_trial, opts) {
                Ok(e) => {
                    out.insert(m, e);
                }
                Err(per_trial) => from_records.push((m, per_trial)),
            }
        }
        if from_records.is_empty() {
            return out;
        }
        let trial = &self.trials[0];
        let names: Vec<MetricPath> = from_records.iter().map(|(m, _)| *m).collect();
        match request_bootstrap(trial, &names, opts) {
            Ok(mut intervals) => {
                for (m, per_trial) in from_records {
                    let e = match intervals.remove(&m) {
                        Some(Ok(e)) => MetricEstimate { per_trial, estimate: Some(e), blank: None },
                        Some(Err(why)) => MetricEstimate::blank(per_trial, why),
                        None => MetricEstimate::blank(per_trial, "not measured"),
                    };
                    out.insert(m, e);
                }
            }
            Err(why) => {
                for (m, per_trial) in from_records {
                    out.insert(m, MetricEstimate::blank(per_trial, why.clone()));
                }
            }
        }
        out
    }

    /// One metric's estimate.
    pub fn estimate(&self, metric: MetricPath, opts: Options) -> MetricEstimate {
        self.estimates(&[metric], opts).remove(&metric).expect("asked for")
    }

    /// The estimate when it needs no records (`Err` hands the values back when it does: one
    /// trial of a record metric).
    fn estimate_without_records(
        &self,
        metric: MetricPath,
        per_trial: Vec<Option<f64>>,
        opts: Options,
    ) -> Result<MetricEstimate, Vec<Option<f64>>> {
        let kind = metric.kind();
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
                let fewest = metric
                    .def()
                    .samples
                    .and_then(|p| {
                        self.trials.iter().map(|t| t.summary.value_of(p).map(|n| n as u64)).min()?
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
pub(super) const BOOTSTRAP_CHUNKS: u32 = 16;

/// Every replicate's value of each of `metrics`: `opts.resamples` draws of `records` with
/// replacement, each through a fresh accumulator with the run's SLO. The chunks run on the
/// machine's threads; the summary each replicate is read through is the run's without its
/// configuration, notes and extra sections, each metric read from its fields.
pub(super) fn bootstrap_replicates(
    summary: &Summary,
    records: &[RequestRecord],
    slo: &Slo,
    metrics: &[MetricPath],
    opts: Options,
) -> BTreeMap<MetricPath, Vec<f64>> {
    // A plateau's figures resample the records sent within it (`steady::measure`), the
    // others every measured record.
    let whole = metrics.iter().any(|m| !m.is_plateau());
    let bounds = summary.plateau.as_ref().and_then(|p| {
        Some(crate::steady::Bounds {
            start_ms: p.start_ms?,
            end_ms: p.end_ms?,
            slice_ms: p.slice_ms.unwrap_or(0.0),
            unsteady_slices: p.unsteady_slices,
        })
    });
    let within: Vec<&RequestRecord> = match (&bounds, metrics.iter().any(|m| m.is_plateau())) {
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
        let mut out: BTreeMap<MetricPath, Vec<f64>> = BTreeMap::new();
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
            for &m in metrics {
                let v = match m.reading() {
                    Reading::ErrorRate => (summary.requests.total > 0)
                        .then(|| summary.requests.failed as f64 / summary.requests.total as f64),
                    _ => summary.metric(m),
                };
                if let Some(v) = v.filter(|v| v.is_finite()) {
                    out.entry(m).or_default().push(v);
                }
            }
        }
        out
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 16) as u32;
    let mut per_chunk: Vec<BTreeMap<MetricPath, Vec<f64>>> = Vec::new();
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
        let mut all: Vec<(u32, BTreeMap<MetricPath, Vec<f64>>)> =
            handles.into_iter().flat_map(|h| h.join().expect("a bootstrap thread")).collect();
        all.sort_by_key(|(c, _)| *c);
        per_chunk = all.into_iter().map(|(_, m)| m).collect();
    });
    let mut replicates: BTreeMap<MetricPath, Vec<f64>> = BTreeMap::new();
    for m in per_chunk {
        for (k, v) in m {
            replicates.entry(k).or_default().extend(v);
        }
    }
    replicates
}

/// Metrics that are shares: their values lie within 0..=1.
pub(super) const SHARES: [&str; 6] = [
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
pub(super) fn within_range(metric: MetricPath, lo: f64, hi: f64) -> (f64, f64) {
    let lo = lo.max(0.0);
    let hi = if SHARES.contains(&metric.as_str()) { hi.min(1.0) } else { hi };
    (lo, hi.max(lo))
}

/// Per metric, the request bootstrap of one trial: the interval, or why there is none.
type Intervals = BTreeMap<MetricPath, Result<Estimate, String>>;

/// The request bootstrap of one trial for `metrics` (all computed from records): each
/// replicate draws the trial's measured records with replacement and computes the summary
/// from them with the run's own accumulator and SLO.
fn request_bootstrap(
    trial: &Trial,
    metrics: &[MetricPath],
    opts: Options,
) -> Result<Intervals, String> {
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
            out.insert(m, Err("not measured".to_string()));
            continue;
        };
        let reps = replicates.get(&m).cloned().unwrap_or_default();
        // A statistic blank in more than 1% of the replicates (too few ok requests to draw
        // from) has no interval.
        if (reps.len() as f64) < 0.99 * opts.resamples as f64 {
            out.insert(
                m,
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
        let undersampled = match m.kind() {
            MetricKind::Records { tail: Some(t) } => {
                tail_undersampled(t, samples_of(m, &trial.summary).unwrap_or(0))
            }
            _ => false,
        };
        out.insert(
            m,
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
