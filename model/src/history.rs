//! The noise history: every gated or recorded trial set's per-trial values, keyed by what
//! makes noise comparable, so a later gate can pool the run-to-run variance of matching sets
//! instead of estimating it from its own three trials.
//!
//! An [`Entry`] is one set: its [`Scenario`] (profile, trial length, the hashes of the resolved
//! load and workload settings, the workload files and the engine config), its [`Fingerprint`]
//! (host, GPU model and driver or the simulated device, engine), the commit it measured, and per
//! metric each trial's value (and, for an A/B gate, each block's paired difference). Entries are
//! stored in git under a ref of their own by the CLI (`xtask::history`); this module is the
//! model: keys, entries, pooling and the CSV / JSONL exports.
//!
//! **Pooling** ([`pool`]): for a metric, the entries of the same scenario and fingerprint give
//! the pooled variance `s_p^2 = sum (n_i - 1) s_i^2 / sum (n_i - 1)` of the per-trial values
//! within each entry (log values for a positive metric, values for a share) with
//! `sum (n_i - 1)` degrees of freedom. Entries of another scenario or fingerprint never count.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::metric::{MetricPath, Scale};
use crate::summary::Summary;

/// The format of an entry (each line of the history's files).
pub const ENTRY_VERSION: u32 = 1;

/// What makes two sets' noise comparable: the same profile, trial length, settings, workload
/// and engine config.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub profile: String,
    /// Measured requests of each trial.
    pub trial_requests: u64,
    /// FNV-1a of the resolved load and workload settings (seeds of the simulator's noise
    /// aside), of the workload files' hashes, and of the engine config's parameters.
    pub settings: String,
    pub workload: String,
    pub engine_config: String,
}

/// The machine and engine: noise of another GPU, driver, host or engine is another noise.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fingerprint {
    /// `summary.environment_fingerprint` (OS, architecture, CPUs, CPU model, memory).
    pub host: String,
    /// `NVIDIA H100 80GB HBM3 / 550.54.15`, `simulated H100-SXM-80GB`, or `none`.
    pub gpu: String,
    /// `infergate simulator 0.1.0`, or the engine the target named.
    pub engine: String,
}

impl Scenario {
    /// A short stable key (a file name in the history).
    pub fn key(&self) -> String {
        key_of(&serde_json::to_string(self).expect("scenarios serialise"))
    }
}

impl Fingerprint {
    pub fn key(&self) -> String {
        key_of(&serde_json::to_string(self).expect("fingerprints serialise"))
    }
}

fn key_of(text: &str) -> String {
    format!("{:016x}", crate::hash::fnv1a(text.as_bytes()))
}

/// What kind of set an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A trial set (`bench --trials`, `gate`, `bench --record-history`).
    Trials,
    /// `cargo xtask noise`: trials of the unchanged configuration.
    Noise,
    /// One arm of an A/B gate (`paired` holds the blocks' differences on the baseline's entry).
    AbBaseline,
    AbCandidate,
}

impl EntryKind {
    /// The name in the history's files (`trials`, `noise`, `ab_baseline`, `ab_candidate`).
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Trials => "trials",
            EntryKind::Noise => "noise",
            EntryKind::AbBaseline => "ab_baseline",
            EntryKind::AbCandidate => "ab_candidate",
        }
    }
}

/// One set in the history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub format_version: u32,
    /// FNV-1a of the entry's content without this field: duplicates are found by it.
    #[serde(default)]
    pub id: String,
    pub kind: EntryKind,
    /// The set's id (run id or A/B gate id).
    pub run_id: String,
    /// RFC 3339, when the set was measured.
    pub measured_at: String,
    /// The commit the set measured and whether the work tree was dirty.
    #[serde(default)]
    pub commit: Option<String>,
    #[serde(default)]
    pub dirty: bool,
    pub scenario: Scenario,
    pub fingerprint: Fingerprint,
    /// Per metric, each trial's value (blank when not measured).
    pub values: BTreeMap<String, Vec<Option<f64>>>,
    /// Per metric, each block's paired difference on the A/B scale (A/B gates only).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub paired: BTreeMap<String, Vec<f64>>,
}

impl Entry {
    /// An entry for trials of one set, all of one scenario (the first trial's).
    pub fn of_trials(
        kind: EntryKind,
        run_id: &str,
        trials: &[&Summary],
        metrics: &[MetricPath],
    ) -> Option<Entry> {
        let first = trials.first()?;
        let values = metrics
            .iter()
            .map(|&m| (m.to_string(), trials.iter().map(|t| t.metric(m)).collect()))
            .collect();
        let mut e = Entry {
            format_version: ENTRY_VERSION,
            id: String::new(),
            kind,
            run_id: run_id.to_string(),
            measured_at: first.timing.started_at.clone(),
            commit: first.git.as_ref().map(|g| g.commit.clone()),
            dirty: first.git.as_ref().is_some_and(|g| g.dirty),
            scenario: scenario_of(first),
            fingerprint: fingerprint_of(first),
            values,
            paired: BTreeMap::new(),
        };
        e.seal();
        Some(e)
    }

    /// Set the id from the content.
    ///
    /// A value that is no finite number is made blank first (a per-trial value) or left out (a
    /// paired difference): JSON has no spelling for it, and an entry must read back exactly as
    /// it was sealed, or every later reader would take it for one edited by hand.
    pub fn seal(&mut self) {
        for v in self.values.values_mut().flatten() {
            if v.is_some_and(|x| !x.is_finite()) {
                *v = None;
            }
        }
        for d in self.paired.values_mut() {
            d.retain(|x| x.is_finite());
        }
        self.id.clear();
        let text = serde_json::to_string(self).expect("entries serialise");
        self.id = key_of(&text);
    }

    /// The per-trial values of a metric on its noise scale (log for a positive metric), the
    /// blanks and non-positive values of a positive metric left out.
    fn scaled(&self, metric: MetricPath) -> Vec<f64> {
        let positive = metric.scale() == Scale::Positive;
        self.values
            .get(metric.as_str())
            .into_iter()
            .flatten()
            .filter_map(|v| *v)
            .filter(|v| v.is_finite() && (!positive || *v > 0.0))
            .map(|v| if positive { v.ln() } else { v })
            .collect()
    }
}

/// The resolved settings that decide noise, without the simulator's per-trial noise seed and
/// without where the engine config was read from (an A/B gate copies each arm's config into
/// its own output directory; the config's content is [`Scenario::engine_config`]).
fn settings_hash(s: &Summary) -> String {
    let mut config = s.config.to_json();
    if let Some(noise) = config.pointer_mut("/sim/noise").and_then(|n| n.as_object_mut()) {
        noise.remove("seed");
    }
    if let Some(sim) = config.get_mut("sim").and_then(|n| n.as_object_mut()) {
        sim.remove("engine_config");
    }
    let pick = |k: &str| config.get(k).cloned().unwrap_or_default();
    let text =
        format!("{}|{}|{}|{}", pick("load"), pick("workload"), pick("sim"), pick("endpoint"));
    key_of(&text)
}

/// The scenario a summary measured.
pub fn scenario_of(s: &Summary) -> Scenario {
    let files: Vec<String> =
        s.workload.files.iter().map(|f| format!("{}={}", f.path, f.hash)).collect();
    let engine = s.engine.as_ref().map(|e| e.params.to_string()).unwrap_or_default();
    Scenario {
        profile: s.profile.clone(),
        trial_requests: s.requests.total,
        settings: settings_hash(s),
        workload: key_of(&files.join("\n")),
        engine_config: key_of(&engine),
    }
}

/// The machine and engine a summary was measured on.
pub fn fingerprint_of(s: &Summary) -> Fingerprint {
    use crate::envkey::{served_by, simulated_device};
    let gpu = match (&s.environment.gpu, s.simulated) {
        (_, true) => {
            let device = simulated_device(s).map_or("default device".into(), |(name, _)| name);
            format!("simulated {device}")
        }
        (Some(g), false) => format!("{} / {}", g.name, g.driver),
        (None, false) => "none".into(),
    };
    let engine = if s.simulated {
        format!("infergate simulator {}", s.tool.version)
    } else {
        served_by(s)
            .map_or_else(|| format!("{} at {}", s.target.model, s.target.name), str::to_string)
    };
    Fingerprint { host: s.environment_fingerprint.clone(), gpu, engine }
}

/// Why an entry was or was not pooled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pooled {
    /// The pooled variance on the metric's noise scale, its degrees of freedom, and how many
    /// entries it comes from.
    pub variance: f64,
    pub df: f64,
    pub entries: usize,
    /// Entries of the history left out: another scenario or fingerprint, too few values.
    pub left_out: usize,
}

/// The per-trial variance of `metric` pooled over the entries of `scenario` and `fingerprint`
/// (entries of `kinds` only; the set being gated, by its run id, excluded). `None` when no
/// matching entry has two values.
pub fn pool(
    entries: &[Entry],
    scenario: &Scenario,
    fingerprint: &Fingerprint,
    metric: MetricPath,
    kinds: &[EntryKind],
    exclude_run: &str,
) -> Option<Pooled> {
    let (mut ss, mut df, mut used, mut left_out) = (0.0, 0.0, 0, 0);
    for e in entries {
        let matches = &e.scenario == scenario
            && &e.fingerprint == fingerprint
            && kinds.contains(&e.kind)
            && e.run_id != exclude_run;
        let v = e.scaled(metric);
        if !matches || v.len() < 2 {
            left_out += 1;
            continue;
        }
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        ss += v.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
        df += (v.len() - 1) as f64;
        used += 1;
    }
    (df > 0.0).then(|| Pooled { variance: ss / df, df, entries: used, left_out })
}

/// The paired differences of `metric` pooled over matching A/B entries (their blocks' own
/// spread, `n - 1` degrees of freedom each).
pub fn pool_paired(
    entries: &[Entry],
    scenario: &Scenario,
    fingerprint: &Fingerprint,
    metric: MetricPath,
) -> Option<Pooled> {
    let (mut ss, mut df, mut used, mut left_out) = (0.0, 0.0, 0, 0);
    for e in entries {
        let d = e.paired.get(metric.as_str()).filter(|d| d.len() >= 2);
        let matches = &e.scenario == scenario && &e.fingerprint == fingerprint;
        let Some(d) = d.filter(|_| matches) else {
            left_out += 1;
            continue;
        };
        let mean = d.iter().sum::<f64>() / d.len() as f64;
        ss += d.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
        df += (d.len() - 1) as f64;
        used += 1;
    }
    (df > 0.0).then(|| Pooled { variance: ss / df, df, entries: used, left_out })
}

/// How a set's estimate used the history.
#[derive(Clone, Debug, PartialEq)]
pub enum PoolOutcome {
    /// Pooled: the set's spread with the history's.
    Pooled { entries: usize, df: f64 },
    /// The set is noisier than the history (F test at [`NOISIER_LEVEL`]): its own spread.
    Noisier { ratio: f64 },
}

/// One-sided level of the F test that finds a set noisier than its history.
pub(crate) const NOISIER_LEVEL: f64 = 0.05;

/// The estimate of a metric from a set's per-trial values with the history's variance pooled
/// in: on log values for a positive metric (`exp(mean ± t s_p / sqrt n)`), values for a share,
/// `t` at `n - 1 + df_history` degrees of freedom. `None` (the caller keeps the set's own
/// interval) when the set is noisier than the history, with why.
pub fn pooled_estimate(
    metric: MetricPath,
    per_trial: &[f64],
    requests: u64,
    pooled: &Pooled,
    confidence: f64,
) -> Result<crate::stats::Estimate, PoolOutcome> {
    use statrs::distribution::{ContinuousCDF, FisherSnedecor, StudentsT};
    let positive = metric.scale() == Scale::Positive;
    let n = per_trial.len() as f64;
    let y: Vec<f64> = per_trial
        .iter()
        .map(|v| if positive { v.max(f64::MIN_POSITIVE).ln() } else { *v })
        .collect();
    let mean = y.iter().sum::<f64>() / n;
    let var =
        if n > 1.0 { y.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    if n > 1.0 && pooled.variance > 0.0 {
        let ratio = var / pooled.variance;
        let crit = FisherSnedecor::new(n - 1.0, pooled.df)
            .map(|f| f.inverse_cdf(1.0 - NOISIER_LEVEL))
            .unwrap_or(f64::INFINITY);
        if ratio > crit {
            return Err(PoolOutcome::Noisier { ratio });
        }
    }
    let own_df = (n - 1.0).max(0.0);
    let df = own_df + pooled.df;
    let sp = ((own_df * var + pooled.df * pooled.variance) / df).sqrt();
    let t = StudentsT::new(0.0, 1.0, df)
        .map(|t| t.inverse_cdf(1.0 - (1.0 - confidence) / 2.0))
        .unwrap_or(f64::INFINITY);
    let half = t * sp / n.sqrt();
    let back = |x: f64| if positive { x.exp() } else { x };
    Ok(crate::stats::Estimate {
        value: back(mean),
        lo: back(mean - half),
        hi: back(mean + half),
        confidence,
        trials: per_trial.len() as u64,
        requests,
        method: crate::stats::Method::PooledTInterval,
        undersampled: false,
    })
}

/// One row per trial and metric: `id,kind,run_id,measured_at,commit,profile,scenario,
/// fingerprint,metric,trial,value` (a blank value empty).
pub fn to_csv(entries: &[Entry]) -> String {
    let mut out = String::from(
        "id,kind,run_id,measured_at,commit,profile,scenario,fingerprint,metric,trial,value\n",
    );
    for e in entries {
        let kind = serde_json::to_value(e.kind)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        for (metric, values) in &e.values {
            for (i, v) in values.iter().enumerate() {
                out.push_str(&format!(
                    "{},{kind},{},{},{},{},{},{},{metric},{},{}\n",
                    e.id,
                    csv_field(&e.run_id),
                    e.measured_at,
                    e.commit.as_deref().unwrap_or(""),
                    csv_field(&e.scenario.profile),
                    e.scenario.key(),
                    e.fingerprint.key(),
                    i + 1,
                    v.map(|v| v.to_string()).unwrap_or_default()
                ));
            }
        }
    }
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One entry per line.
pub fn to_jsonl(entries: &[Entry]) -> String {
    entries.iter().map(|e| serde_json::to_string(e).expect("entries serialise") + "\n").collect()
}

/// Why a line of a history file is not an entry.
#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("format_version {found} is not one this tool reads ({ENTRY_VERSION})")]
    Version { found: u32 },
    #[error("id {id} does not match its content ({content}): edited by hand?")]
    Edited { id: String, content: String },
}

/// Parse one line of a history file; the error says what is wrong.
pub fn parse_line(line: &str) -> Result<Entry, EntryError> {
    let e: Entry = serde_json::from_str(line)?;
    if e.format_version != ENTRY_VERSION {
        return Err(EntryError::Version { found: e.format_version });
    }
    let mut sealed = e.clone();
    sealed.seal();
    if sealed.id != e.id {
        return Err(EntryError::Edited { id: e.id, content: sealed.id });
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_are_the_files_names() {
        for k in
            [EntryKind::Trials, EntryKind::Noise, EntryKind::AbBaseline, EntryKind::AbCandidate]
        {
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{}\"", k.as_str()));
        }
    }

    fn entry(run: &str, values: &[f64], host: &str) -> Entry {
        let mut e = Entry {
            format_version: ENTRY_VERSION,
            id: String::new(),
            kind: EntryKind::Trials,
            run_id: run.into(),
            measured_at: "2026-12-01T00:00:00.000Z".into(),
            commit: Some("abc".into()),
            dirty: false,
            scenario: Scenario {
                profile: "default".into(),
                trial_requests: 80,
                settings: "s".into(),
                workload: "w".into(),
                engine_config: "e".into(),
            },
            fingerprint: Fingerprint { host: host.into(), gpu: "none".into(), engine: "x".into() },
            values: [(
                "metrics.ttft_ms.p99".to_string(),
                values.iter().map(|v| Some(*v)).collect(),
            )]
            .into(),
            paired: BTreeMap::new(),
        };
        e.seal();
        e
    }

    #[test]
    fn entries_read_back_with_their_ids_whatever_their_values() {
        // Values whose text the default JSON number parser does not read back to the same
        // number (the last digits of a per-trial mean), and small and whole ones.
        let values = [
            1.0,
            1e-7,
            754.416171234,
            0.1 + 0.2,
            2.0f64.sqrt() * 1e300,
            5e-324,
            123456789.12345679,
            0.30000000000000004,
        ];
        let mut e = entry("a", &values, "h1");
        e.kind = EntryKind::AbBaseline;
        e.paired.insert("metrics.ttft_ms.p99".into(), values.iter().map(|v| v / 3.0).collect());
        e.seal();
        let line = serde_json::to_string(&e).unwrap();
        let back = parse_line(&line).unwrap();
        assert_eq!(back.id, e.id);
        assert_eq!(back, e);
        // What JSON cannot spell is blank (or left out) before the seal, not after.
        let mut odd = entry("n", &[f64::NAN, 1.0, f64::INFINITY], "h1");
        odd.paired.insert("metrics.ttft_ms.p99".into(), vec![f64::NAN, 0.5]);
        odd.seal();
        assert_eq!(odd.values["metrics.ttft_ms.p99"], vec![None, Some(1.0), None]);
        assert_eq!(odd.paired["metrics.ttft_ms.p99"], vec![0.5]);
        assert_eq!(parse_line(&serde_json::to_string(&odd).unwrap()).unwrap(), odd);
        // Every value a random walk over the doubles gives, too.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(x >> 2);
            if !v.is_finite() {
                continue;
            }
            let e = entry("r", &[v, v * 0.5], "h1");
            let back = parse_line(&serde_json::to_string(&e).unwrap())
                .unwrap_or_else(|err| panic!("{v:e}: {err}"));
            assert_eq!(back.id, e.id, "{v:e}");
        }
    }

    #[test]
    fn pooling_takes_the_within_set_variance_of_matching_entries_only() {
        let a = entry("a", &[100.0, 110.0, 90.0], "h1");
        let b = entry("b", &[100.0, 105.0], "h1");
        let other_host = entry("c", &[10.0, 1000.0], "h2");
        let p = pool(
            &[a.clone(), b.clone(), other_host],
            &a.scenario,
            &a.fingerprint,
            MetricPath::named("metrics.ttft_ms.p99"),
            &[EntryKind::Trials],
            "",
        )
        .unwrap();
        assert_eq!((p.entries, p.left_out, p.df), (2, 1, 3.0));
        let logs = |v: &[f64]| {
            let l: Vec<f64> = v.iter().map(|x| x.ln()).collect();
            let m = l.iter().sum::<f64>() / l.len() as f64;
            l.iter().map(|x| (x - m).powi(2)).sum::<f64>()
        };
        let want = (logs(&[100.0, 110.0, 90.0]) + logs(&[100.0, 105.0])) / 3.0;
        assert!((p.variance - want).abs() < 1e-12);
        // The set being gated is never its own history.
        let p = pool(
            &[a.clone(), b],
            &a.scenario,
            &a.fingerprint,
            MetricPath::named("metrics.ttft_ms.p99"),
            &[EntryKind::Trials],
            "a",
        )
        .unwrap();
        assert_eq!(p.entries, 1);
        assert!(
            pool(
                std::slice::from_ref(&a),
                &a.scenario,
                &a.fingerprint,
                MetricPath::named("metrics.ttft_ms.p99"),
                &[EntryKind::Noise],
                ""
            )
            .is_none()
        );
    }

    #[test]
    fn lines_round_trip_and_edited_lines_are_refused() {
        let a = entry("a", &[1.0, 2.0], "h");
        let line = to_jsonl(std::slice::from_ref(&a));
        assert_eq!(parse_line(line.trim()).unwrap(), a);
        let edited = line.replace("[1.0,2.0]", "[1.0,3.0]");
        let e = parse_line(edited.trim()).unwrap_err().to_string();
        assert!(e.contains("does not match its content"), "{e}");
        assert!(parse_line("{").is_err());
        let csv = to_csv(&[a]);
        assert_eq!(csv.lines().count(), 3);
        assert!(csv.lines().nth(1).unwrap().ends_with(",metrics.ttft_ms.p99,1,1"), "{csv}");
    }
}
