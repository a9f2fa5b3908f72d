//! Reading a trial set back: `trials.json` (the typed artifact that lists the trials, their
//! seeds and the estimates the bench computed), the trials' run directories, and the checks
//! that they belong together (one profile, scenario, engine config and workload).

use super::*;

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
    /// What the trials were measured with ([`TrialRequest`]): `bench trials SET
    /// --until-decided` measures more trials of the set with exactly these settings. `None`: a
    /// set written without it (format 1, which recorded bench arguments as text), gated as it
    /// is but never added to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Box<TrialRequest>>,
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
    /// A warmup trial's [`headline_metrics`](super::headline_metrics) (blank where not measured); empty for trials.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headline: BTreeMap<String, Option<f64>>,
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

    /// Format 1 recorded the bench arguments of its trials as text (`bench_args`) in place of
    /// the typed request; they leave some settings out (trace replay), so the set reads without
    /// a request: gated as it is, never added to.
    fn upgrade(
        found: u64,
        mut doc: serde_json::Value,
    ) -> Result<serde_json::Value, crate::artifact::UpgradeError> {
        use crate::artifact::UpgradeError;
        match (found, doc.as_object_mut()) {
            (1, Some(o)) => {
                o.remove("bench_args");
                o.insert("format_version".into(), FORMAT_VERSION.into());
                Ok(doc)
            }
            (1, None) => Err(UpgradeError::NotAnObject),
            _ => Err(UpgradeError::NeverWritten { found }),
        }
    }
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
pub(super) fn same_measurement(path: &Path, first: &Trial, t: &Trial) -> Result<(), TrialsError> {
    let Some((key, found, expected)) = measurement_difference(&first.summary, &t.summary) else {
        return Ok(());
    };
    let name = |t: &Trial| t.dir.file_name().map_or(String::new(), |n| n.to_string_lossy().into());
    let d = Box::new(MixedTrial { first: name(first), trial: name(t), key, found, expected });
    Err(TrialsError::Mixed { path: path.to_path_buf(), d })
}

/// The `trial-NN` directories of `dir`, sorted.
pub(super) fn trial_dirs(dir: &Path) -> Vec<String> {
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
}
