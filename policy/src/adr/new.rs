//! `adr new`: a record written from measured runs.
//!
//! Everything that can be filled from the runs is: the metrics matrix, each experiment's
//! parameter changes against the baseline, the decision lines of the chosen configuration,
//! proposed thresholds, rollback conditions and what is needed to reproduce the runs. What only
//! a person can write (the scenario's story in Context, the Consequences, the deciders when not
//! given) is left as a `<...>` placeholder: `adr lint` reports each one and `adr accept` refuses
//! the record until they are replaced. A value a run did not measure is `—`, never an estimate.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use infergate_model::Summary;
use infergate_model::config::ConfigKey;
use infergate_model::envkey::EnvironmentKey;
use infergate_model::metric::MetricPath;
use serde_json::Value as Json;

use infergate_model::compare::{Change, compare_estimates};
use infergate_model::stats::{Estimate, sig_text, signed_sig_text};
use infergate_model::trials::MetricEstimate;

use super::capacity::{self as cap, CapacityRow};
use super::draft::{Body, Draft, LEFT, RIGHT, Section, Table};
use super::model::{SLO_EXCEPTION, SLO_MISSED, SectionKind};
use crate::text::BLANK;
use crate::thresholds::Action;
use crate::thresholds::propose::{
    DETECT_POWER, LIMIT_DIGITS, Proposed, propose, propose_from_estimate,
};
use crate::thresholds::rollback::{DEFAULT_WINDOW, RollbackAction, RollbackCondition, breaking};

/// The matrix columns (besides Config and Conclusion): header, metric, action of the proposed
/// threshold.
pub const MATRIX: [(&str, &str, Action); 7] = [
    ("TTFT P99 (ms)", "metrics.ttft_ms.p99", Action::Block),
    ("TPOT P99 (ms)", "metrics.tpot_ms.p99", Action::Block),
    ("ITL jitter", "metrics.itl_jitter", Action::Warn),
    ("Goodput", "goodput.ratio", Action::Block),
    ("Throughput (tok/s)", "throughput.output_tokens_per_s", Action::Warn),
    ("KV fragmentation", "server.kv_fragmentation", Action::Warn),
    ("Cost / 1M output tokens", "cost.per_1m_output_tokens", Action::Warn),
];

/// Columns after [`MATRIX`]'s that a record shows only when one of its runs measured them: the
/// engine's token goodput (output tokens delivered to clients that stayed over those it
/// computed; runs that cancel requests on purpose) and energy per 1M output tokens (runs with
/// GPU power samples).
pub const MEASURED_ONLY: [(&str, &str, Action); 2] = [
    ("Token goodput", "goodput.token_ratio", Action::Warn),
    ("Energy (J / 1M output tokens)", "server.gpu.joules_per_1m_output_tokens", Action::Warn),
];

/// Every column a record may have: [`MATRIX`] then [`MEASURED_ONLY`].
fn all_columns() -> impl Iterator<Item = (&'static str, &'static str, Action)> {
    MATRIX.into_iter().chain(MEASURED_ONLY)
}

/// Why `adr new` cannot write a record from what it was given (usage errors, exit 2).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NewAdrError {
    #[error(
        "--choose {choose} names no experiment: there are {experiments} (--choose 0 keeps the baseline)"
    )]
    NoSuchExperiment { choose: usize, experiments: usize },
    #[error("title `{0}` has no ASCII letters or digits to name the file with")]
    TitleWithoutName(String),
    /// The draft's template failed: a bug of the tool, not of its input.
    #[error("cannot render the record: {0}")]
    Render(String),
    /// Decision lines set keys to values the chosen run's server said it did not run: the run
    /// did not measure the values the record would decide.
    #[error(
        "the server run {run} measured contradicts the decision: {}; the run measured another \
         configuration than its engine config file. Start the server as the file says (or change \
         the file) and measure again",
        .lines.join("; ")
    )]
    ServedContradicts {
        run: String,
        /// Each contradicted line with what the server said:
        /// `` `configs/engine.toml: scheduler.max_num_seqs = 256`: the server ran
        /// scheduler.max_num_seqs = 64 (GET /server_info ...) ``.
        lines: Vec<String>,
    },
}

/// Why a path does not stand for one run (see [`resolve_run_dir`]).
#[derive(Debug, thiserror::Error)]
pub enum RunPathError {
    /// The sweep summary could not be read.
    #[error(transparent)]
    Sweep(infergate_model::artifact::ArtifactError),
    #[error("the sweep {} has no stage", .0.display())]
    EmptySweep(PathBuf),
    #[error("the acceptance {} has no {side} run (only the numeric layer ran)", .path.display())]
    NoAcceptanceRun { path: PathBuf, side: &'static str },
    /// The comparison summary could not be read.
    #[error(transparent)]
    Comparison(infergate_model::artifact::ArtifactError),
    #[error("the strategy comparison {} has no run", .0.display())]
    EmptyComparison(PathBuf),
}

/// The run directories a path stands for: a strategy comparison's directory
/// (`comparison.json`) stands for every strategy's run in the comparison's order, or for its
/// first strategy's run when used as the baseline; any other path for the one run
/// [`resolve_run_dir`] finds.
pub fn resolve_run_dirs(path: &Path, as_baseline: bool) -> Result<Vec<PathBuf>, RunPathError> {
    use infergate_model::strategy_compare::{COMPARISON_FILE, StrategyComparison};
    if !path.join(COMPARISON_FILE).is_file() {
        return resolve_run_dir(path, as_baseline).map(|d| vec![d]);
    }
    let cmp = StrategyComparison::read(path).map_err(RunPathError::Comparison)?;
    let mut dirs: Vec<PathBuf> = cmp.run_dirs(path).into_iter().map(|(_, d)| d).collect();
    if dirs.is_empty() {
        return Err(RunPathError::EmptyComparison(path.to_path_buf()));
    }
    if as_baseline {
        dirs.truncate(1);
    }
    Ok(dirs)
}

/// How sure a row's numbers are: the trials behind it and each matrix metric's estimate
/// (`infergate_model::trials::TrialSet::estimates`).
#[derive(Clone, Debug, Default)]
pub struct RowStats {
    pub trials: usize,
    /// Measured requests over the trials.
    pub requests: u64,
    pub confidence: f64,
    pub estimates: BTreeMap<String, MetricEstimate>,
    /// Trial 1 of the row's set looks like a cold start (`infergate_model::trials::cold_start`): the
    /// note, written under the matrix next to the row's label.
    pub cold_start: Option<String>,
}

/// Each row's [`RowStats`] from its trials, at `confidence`.
pub fn row_stats(sets: &[infergate_model::trials::TrialSet], confidence: f64) -> Vec<RowStats> {
    let metrics: Vec<MetricPath> = all_columns().map(|(_, m, _)| MetricPath::named(m)).collect();
    // The gate's estimation, so the record's intervals are the ones its gate will compute.
    let opts =
        crate::thresholds::evaluate::GateOptions { confidence, ..Default::default() }.estimation();
    sets.iter()
        .map(|set| {
            // Each column as the row's profile has it read (the plateau's figure under
            // `steady.gate`), kept under the column's name.
            let paths: Vec<MetricPath> = match set.trials.first() {
                Some(t) => metrics.iter().map(|&m| t.summary.gated_path(m)).collect(),
                None => metrics.clone(),
            };
            let mut by_path = set.estimates(&paths, opts);
            let estimates = metrics
                .iter()
                .zip(&paths)
                .filter_map(|(m, p)| Some((m.to_string(), by_path.remove(p)?)))
                .collect();
            RowStats {
                trials: set.trials.len(),
                requests: set.requests(),
                confidence,
                estimates,
                cold_start: set.cold_start(&metrics).map(|c| c.note),
            }
        })
        .collect()
}

/// What `adr new` writes a record from.
pub struct NewAdr<'a> {
    pub number: u32,
    pub title: &'a str,
    pub date: NaiveDate,
    pub deciders: Option<&'a str>,
    /// Fraction (0.1 = 10%).
    pub headroom: f64,
    pub baseline: &'a Summary,
    pub experiments: &'a [Summary],
    /// 0 = keep the baseline, k = Exp-k.
    pub choose: usize,
    /// The run directories as given (relative to the repository root), baseline first; shown in
    /// the Reproduction section. Empty: not shown.
    pub run_dirs: &'a [String],
    /// Charts the runs wrote (a sweep's `sweep.svg`), relative to the repository root.
    pub charts: &'a [String],
    /// The record's own charts: `(assets/NNNN-x.svg, caption)`, relative to the record and
    /// committed with it (`crate::adr::assets`).
    pub assets: &'a [(String, String)],
    /// The directory the record is written to, relative to the repository root (`docs/adr`):
    /// run directories and charts are linked relative to it.
    pub record_dir: &'a str,
    /// Per row (baseline first), its trials and estimates; empty: the values alone, without
    /// intervals.
    pub stats: &'a [RowStats],
    /// Lines under the matrix about the configurations considered (a tune's failed starts,
    /// its winner at the edge of the grid), each a sentence.
    pub considered: &'a [String],
    /// The runs' workload files refreshed from production (`dataset refresh`), with their
    /// provenance: cited in the Reproduction section.
    pub refreshed: &'a [RefreshedDataset],
    /// The governed sources where the team deploys (`[[adr.source]]`), each with the canonical
    /// keys it gives: a value the decision makes mandatory gets a decision line for each source
    /// that sets it too, so the pull request changing the deployment file is covered.
    pub sources: &'a [(String, Vec<String>)],
    /// Per row (baseline first), the capacity search it was measured by (`bench --capacity`),
    /// `None` for a run, trial set or sweep; empty: no row is one. A capacity row's summary and
    /// trials are those of its probe at the bracket's lower end (`super::capacity`).
    pub capacities: &'a [Option<CapacityRow>],
}

/// A workload file of the runs that has a provenance file beside it (`dataset refresh`).
#[derive(Clone, Debug)]
pub struct RefreshedDataset {
    /// The dataset as the runs name it, and the hash they recorded of it.
    pub file: String,
    pub run_hash: String,
    /// The provenance file, relative to the repository root.
    pub provenance_file: String,
    pub provenance: infergate_model::refresh::provenance::Provenance,
}

/// A file-name slug: lowercase ASCII letters and digits joined by `-`, at most 60 characters.
pub fn slug(title: &str) -> Result<String, NewAdrError> {
    let mut words: Vec<String> = Vec::new();
    for w in title.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()) {
        words.push(w.to_ascii_lowercase());
    }
    let mut out = String::new();
    for w in words {
        if !out.is_empty() && out.len() + 1 + w.len() > 60 {
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&w);
    }
    if out.is_empty() {
        return Err(NewAdrError::TitleWithoutName(title.to_string()));
    }
    out.truncate(60);
    Ok(out)
}

/// A record field given on the command line (the title, the deciders): one line of text. A
/// line break would start a line of the record's own (`- Status: Accepted` under the title), so
/// it and every other control character are refused rather than folded.
pub fn parse_one_line(text: &str) -> Result<String, String> {
    match text.chars().find(|c| c.is_control()) {
        Some(c) => Err(format!(
            "holds a control character ({}): a record's title and deciders are one line of text",
            c.escape_default()
        )),
        None => Ok(text.to_string()),
    }
}

/// A title as Markdown text that reads back as itself: as given when CommonMark reads it so
/// (`max_num_seqs`, `(8k batches)!`), else with every character it could take for markup (a
/// backslash escape, emphasis, code, a link, HTML, an entity, a closing `#` sequence)
/// escaped with a backslash.
pub fn markdown_text(title: &str) -> String {
    if heading_text(title) == title {
        return title.to_string();
    }
    let mut out = String::with_capacity(title.len() * 2);
    for c in title.chars() {
        if matches!(c, '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '&' | '#' | '!') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The text of `# {markdown}` as the records' parser reads a heading.
fn heading_text(markdown: &str) -> String {
    use pulldown_cmark::{Event, Parser};
    let doc = format!("# {markdown}\n");
    let mut text = String::new();
    for event in Parser::new_ext(&doc, pulldown_cmark::Options::ENABLE_TABLES) {
        if let Event::Text(t) | Event::Code(t) | Event::InlineHtml(t) | Event::Html(t) = event {
            text.push_str(&t);
        }
    }
    text.trim().to_string()
}

/// Engine parameters flattened to dotted keys (`scheduler.max_num_seqs`).
pub fn flatten_params(params: &Json) -> BTreeMap<String, Json> {
    infergate_model::summary::flatten_params(params)
}

/// A JSON value as a TOML value (`None` for null, which TOML cannot hold).
pub fn json_to_toml(v: &Json) -> Option<toml::Value> {
    Some(match v {
        Json::Null => return None,
        Json::Bool(b) => toml::Value::Boolean(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64()?),
        },
        Json::String(s) => toml::Value::String(s.clone()),
        Json::Array(a) => toml::Value::Array(a.iter().map(json_to_toml).collect::<Option<_>>()?),
        Json::Object(m) => toml::Value::Table(
            m.iter().map(|(k, v)| Some((k.clone(), json_to_toml(v)?))).collect::<Option<_>>()?,
        ),
    })
}

fn toml_text(v: &Json) -> String {
    json_to_toml(v).map_or_else(|| "null".to_string(), |t| t.to_string())
}

/// One experiment's engine parameters against the baseline's.
#[derive(Debug, Default, PartialEq)]
pub struct ParamDiff {
    /// Keys whose value differs or that only the experiment has: (key, baseline value, new value).
    pub changed: Vec<(String, Option<Json>, Json)>,
    /// Keys only the baseline has.
    pub removed: Vec<(String, Json)>,
}

/// The parameter diff of `exp` against `base`; `None` when either run recorded no engine
/// parameters (the diff is unknown, not empty).
pub fn param_diff(base: &Summary, exp: &Summary) -> Option<(String, ParamDiff)> {
    let b = base.engine.as_ref()?;
    let e = exp.engine.as_ref()?;
    let bp = flatten_params(&b.params);
    let ep = flatten_params(&e.params);
    let mut diff = ParamDiff::default();
    for (k, v) in &ep {
        if bp.get(k) != Some(v) {
            diff.changed.push((k.clone(), bp.get(k).cloned(), v.clone()));
        }
    }
    for (k, v) in &bp {
        if !ep.contains_key(k) {
            diff.removed.push((k.clone(), v.clone()));
        }
    }
    Some((e.file.clone(), diff))
}

/// The engine config files of two runs, `(baseline's, experiment's)`, when both recorded one.
pub fn param_files(base: &Summary, exp: &Summary) -> Option<(String, String)> {
    Some((base.engine.as_ref()?.file.clone(), exp.engine.as_ref()?.file.clone()))
}

/// What distinguishes a run among the runs of the command that made it: the part its
/// summary records (a sweep stage's load, `concurrency 32`; a comparison's strategy,
/// `continuous`), else the load of the sweep stage it was (`extra.sweep`).
pub fn run_part(r: &Summary) -> Option<String> {
    if let Some(part) = r.invocation.as_ref().and_then(|i| i.part.clone()) {
        return Some(part);
    }
    let sw = r.extra.sweep.as_ref()?;
    Some(format!("{} {}", sw.dimension, sig_text(sw.load?)))
}

/// The rows' labels, baseline first: a row is named by what distinguishes its run
/// ([`run_part`]: `continuous`, `concurrency 32`; the baseline `Baseline (serial)`), and by its
/// place (`Baseline`, `Exp-2`) when nothing does or two rows would share a name
/// (`Exp-2 (concurrency 32)`).
pub fn row_labels(runs: &[&Summary]) -> Vec<String> {
    let parts: Vec<Option<String>> = runs.iter().map(|r| run_part(r)).collect();
    let unique = |p: &String| parts.iter().filter(|q| q.as_ref() == Some(p)).count() == 1;
    parts
        .iter()
        .enumerate()
        .map(|(i, part)| match (i, part) {
            (0, Some(p)) => format!("Baseline ({p})"),
            (0, None) => "Baseline".to_string(),
            (_, Some(p)) if unique(p) && !p.starts_with("Baseline") && !p.starts_with("Exp-") => {
                p.clone()
            }
            (i, Some(p)) => format!("Exp-{i} ({p})"),
            (i, None) => format!("Exp-{i}"),
        })
        .collect()
}

/// The governed file a run's engine config was generated from and the keys the run set
/// otherwise, when it ran a generated variant (a strategy comparison's run).
pub fn derivation(r: &Summary) -> Option<(&str, &[infergate_model::summary::ParamChange])> {
    let e = r.engine.as_ref()?;
    Some((e.derived_from.as_deref()?, e.changes.as_slice()))
}

/// One change of a variant against its governed file, in words: ``add `k = v` `` when the file
/// does not set the key yet, ``change `k`: `old` -> `new` `` when it does.
fn derived_change_text(c: &infergate_model::summary::ParamChange) -> String {
    match &c.from {
        None => format!(
            "add {} (not set there yet)",
            code(&format!("{} = {}", c.key, toml_text(&c.to)))
        ),
        Some(old) => format!(
            "change {}: {} -> {}",
            code(&c.key),
            code(&toml_text(old)),
            code(&toml_text(&c.to))
        ),
    }
}

/// The run directory a path stands for: a run directory itself; a sweep directory
/// (`sweep.json`): the knee's stage, or the last stage when no stage met the SLOs; an acceptance
/// directory (`acceptance.json`): its `baseline/` run when used as the baseline, else its
/// `candidate/` run.
pub fn resolve_run_dir(path: &Path, as_baseline: bool) -> Result<PathBuf, RunPathError> {
    if path.join(infergate_model::rundir::SUMMARY_FILE).is_file() || !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    if path.join(infergate_model::sweep::SWEEP_FILE).is_file() {
        let sweep =
            infergate_model::sweep::SweepSummary::read(path).map_err(RunPathError::Sweep)?;
        let stage = match &sweep.knee {
            Some(k) => sweep.stages.iter().find(|s| s.stage == k.stage),
            None => sweep.stages.last(),
        };
        return stage
            .map(|s| path.join(&s.dir))
            .ok_or_else(|| RunPathError::EmptySweep(path.to_path_buf()));
    }
    if path.join("acceptance.json").is_file() {
        let side = if as_baseline { "baseline" } else { "candidate" };
        let run = path.join(side);
        if run.join(infergate_model::rundir::SUMMARY_FILE).is_file() {
            return Ok(run);
        }
        return Err(RunPathError::NoAcceptanceRun { path: path.to_path_buf(), side });
    }
    Ok(path.to_path_buf())
}

/// The knee of the sweep a run belongs to (`extra.sweep`): `concurrency 128`.
pub fn knee_cell(r: &Summary) -> String {
    let Some(sw) = &r.extra.sweep else { return BLANK.to_string() };
    match sw.knee {
        Some(k) => format!("{} {}", sw.dimension, sig_text(k)),
        None => "none met the SLOs".to_string(),
    }
}

/// The layer verdicts of the acceptance a run belongs to (`extra.acceptance`).
pub fn acceptance_cell(r: &Summary) -> String {
    let Some(a) = &r.extra.acceptance else { return BLANK.to_string() };
    let layers: Vec<String> = [
        ("numeric", &a.numeric.verdict),
        ("engine", &a.engine.verdict),
        ("business", &a.business.verdict),
    ]
    .iter()
    .map(|(l, v)| format!("{l} {}", v.as_deref().unwrap_or(BLANK)))
    .collect();
    let passed = if a.passed { "accepted" } else { "not accepted" };
    format!("{passed}: {}", layers.join(", "))
}

fn cell(v: Option<f64>) -> String {
    v.map_or_else(|| BLANK.to_string(), sig_text)
}

fn code(s: &str) -> String {
    format!("`{s}`")
}

/// The scenario as the runs describe it (profile, target, load, workload, SLO).
fn scenario(s: &Summary) -> String {
    let c = s.config.to_json();
    let get = |key: &'static str| ConfigKey::literal(key).get_json(&c);
    let mut parts = vec![format!(
        "profile {}, target {} (model {}, {} endpoint, {})",
        code(&s.profile),
        code(&s.target.name),
        code(&s.target.model),
        s.target.endpoint,
        if s.target.stream { "streaming" } else { "not streaming" }
    )];
    match get("load.mode").and_then(Json::as_str) {
        Some("closed") => {
            if let Some(n) = get("load.concurrency").and_then(Json::as_u64) {
                parts.push(format!("closed loop at concurrency {n}"));
            }
        }
        Some("open") => {
            let rate = get("load.rate").and_then(Json::as_f64).map_or(BLANK.to_string(), sig_text);
            let arrival = get("load.arrival").and_then(Json::as_str).unwrap_or("");
            parts.push(format!("open loop at {rate} req/s ({arrival} arrivals)"));
        }
        Some("trace") => {
            let scale =
                get("load.time_scale").and_then(Json::as_f64).map_or(BLANK.to_string(), sig_text);
            parts.push(format!("trace replay at time scale {scale}"));
        }
        _ => {}
    }
    for f in &s.workload.files {
        parts.push(format!("workload file {} ({})", code(&f.path), code(&f.hash)));
    }
    if let Some(lengths) = get("workload.input_lengths").and_then(Json::as_array) {
        let ls: Vec<String> = lengths.iter().map(|l| l.to_string()).collect();
        let repeats = get("workload.repeats")
            .and_then(Json::as_u64)
            .map(|r| format!(" x {r}"))
            .unwrap_or_default();
        parts.push(format!("prompts of {} tokens{repeats}", ls.join("/")));
    }
    if let Some(m) = get("workload.max_tokens").and_then(Json::as_u64) {
        parts.push(format!("max_tokens {m}"));
    }
    let slo = &s.goodput.slo;
    let mut objectives = Vec::new();
    if let Some(v) = slo.ttft_ms {
        objectives.push(format!("TTFT <= {} ms", sig_text(v)));
    }
    if let Some(v) = slo.tpot_ms {
        objectives.push(format!("TPOT <= {} ms", sig_text(v)));
    }
    if let Some(v) = slo.e2e_ms {
        objectives.push(format!("E2E <= {} ms", sig_text(v)));
    }
    if !objectives.is_empty() {
        parts.push(format!("goodput SLO {}", objectives.join(", ")));
    }
    parts.push(format!(
        "{} measured requests ({} warmup excluded)",
        s.requests.total, s.requests.warmup
    ));
    parts.join("; ")
}

/// Render the record. Errors are usage errors (bad `choose`).
pub fn render(input: &NewAdr<'_>) -> Result<String, NewAdrError> {
    let n_exp = input.experiments.len();
    if input.choose > n_exp {
        return Err(NewAdrError::NoSuchExperiment { choose: input.choose, experiments: n_exp });
    }
    let all: Vec<&Summary> =
        std::iter::once(input.baseline).chain(input.experiments.iter()).collect();
    let labels = row_labels(&all);
    let ctx = Runs {
        input,
        chosen: all[input.choose],
        chosen_label: labels[input.choose].clone(),
        labels,
        all,
    };
    served_check(input.baseline, input.experiments, input.choose)?;
    // Each section's writer fills a body; the decision's and the thresholds' return what the
    // rollback conditions are made of.
    let mut decision = Body::default();
    let rollback_values = decision_section(&mut decision, &ctx);
    let mut thresholds = Body::default();
    let proposed = thresholds_section(&mut thresholds, &ctx);
    let sections = vec![
        Section::new(SectionKind::Context, written(|o| context_section(o, &ctx))),
        Section::new(
            SectionKind::MetricsMatrix,
            written(|o| {
                matrix_section(o, &ctx);
                run_notes(o, &ctx);
                param_changes(o, &ctx);
                o.push('\n');
            }),
        ),
        Section::new(SectionKind::Decision, decision),
        Section::new(SectionKind::Thresholds, thresholds),
        Section::new(
            SectionKind::Rollback,
            written(|o| rollback_section(o, &ctx, &proposed, &rollback_values)),
        ),
        Section::new(
            SectionKind::Consequences,
            written(|o| {
                o.push_str(
                    "<what changes for operators, capacity and cost; what this decision gives up>\n\n",
                )
            }),
        ),
        Section::new(SectionKind::Reproduction, written(|o| reproduction_section(o, &ctx))),
        Section::new(SectionKind::Links, written(|o| o.push_str("None.\n"))),
    ];
    let draft = Draft {
        number: format!("{:04}", input.number),
        title: markdown_text(input.title.trim()),
        status: "Proposed",
        date: input.date.format("%Y-%m-%d").to_string(),
        deciders: input
            .deciders
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .unwrap_or("<names>")
            .to_string(),
        sections,
    };
    // The commands the record names, in the name the tool was invoked by.
    draft
        .render()
        .map(|text| crate::text::as_invoked(&text))
        .map_err(|e| NewAdrError::Render(format!("{e:#}")))
}

/// The body one section's writer fills.
fn written(write: impl FnOnce(&mut Body)) -> Body {
    let mut o = Body::default();
    write(&mut o);
    o
}

/// A record's runs: the baseline first, then the experiments, and the one it adopts.
struct Runs<'a> {
    input: &'a NewAdr<'a>,
    all: Vec<&'a Summary>,
    /// Each row's label, baseline first ([`row_labels`]).
    labels: Vec<String>,
    chosen: &'a Summary,
    chosen_label: String,
}

impl Runs<'_> {
    /// The record's columns: [`MATRIX`], then those of [`MEASURED_ONLY`] some row measured.
    fn columns(&self) -> Vec<(&'static str, &'static str, Action)> {
        let measured = |m: &str| (0..self.all.len()).any(|i| self.value(i, m).is_some());
        MATRIX.into_iter().chain(MEASURED_ONLY.into_iter().filter(|c| measured(c.1))).collect()
    }

    fn stats(&self, i: usize) -> Option<&RowStats> {
        self.input.stats.get(i)
    }

    /// Row `i`'s estimate of `metric`, when it has one.
    fn estimate(&self, i: usize, metric: &str) -> Option<&Estimate> {
        self.stats(i)?.estimates.get(metric)?.estimate.as_ref()
    }

    /// Row `i`'s value of `metric`: its estimate's; without one, its run's when the row is one
    /// run, blank for a trial set (its trials' values are not pooled without a method).
    fn value(&self, i: usize, metric: &str) -> Option<f64> {
        if let Some(e) = self.estimate(i, metric) {
            return Some(e.value);
        }
        match self.stats(i) {
            Some(st) if st.trials > 1 => None,
            _ => self.all[i].gated_metric(MetricPath::named(metric)),
        }
    }

    /// Coverage of the rows' intervals.
    fn confidence(&self) -> f64 {
        self.input
            .stats
            .first()
            .map_or(infergate_model::stats::DEFAULT_CONFIDENCE, |s| s.confidence)
    }

    /// Whether the rows carry estimates.
    fn has_stats(&self) -> bool {
        !self.input.stats.is_empty()
    }

    /// Row `i`'s capacity search, when it was measured by one.
    fn capacity(&self, i: usize) -> Option<&CapacityRow> {
        self.input.capacities.get(i)?.as_ref()
    }

    /// Whether a row was measured by a capacity search.
    fn has_capacity(&self) -> bool {
        self.input.capacities.iter().any(Option::is_some)
    }
}

/// A matrix cell: the row's value (with its interval when it has one), then for an experiment
/// its change against the baseline and, when both have intervals, whether it is significant.
fn matrix_cell(ctx: &Runs<'_>, i: usize, metric: &str) -> String {
    let (v, base) = (ctx.value(i, metric), ctx.value(0, metric));
    let Some(e) = ctx.estimate(i, metric) else { return change_cell(v, base, i == 0) };
    let shown = e.short().to_string();
    let (Some(v), Some(b), false) = (v, base, i == 0) else { return shown };
    if v == b {
        return format!("{shown} (=)");
    }
    let d = v - b;
    let pct = if b != 0.0 { format!(", {:+.1}%", d / b.abs() * 100.0) } else { String::new() };
    let m = MetricPath::named(metric);
    let (_, change) = compare_estimates(m, ctx.estimate(0, metric), Some(e), ctx.confidence());
    let word = match change {
        Change::Better | Change::Worse => ", significant",
        Change::NotSignificant => ", not significant",
        Change::NotTested | Change::Blank => "",
    };
    format!("{shown} ({}{pct}{word})", signed_sig_text(d))
}

/// Context: a placeholder for the story, the measured scenario, and a warning for each run that
/// is not comparable with the baseline.
fn context_section(o: &mut Body, ctx: &Runs<'_>) {
    let (runs, input) = (&ctx.all, ctx.input);
    o.push_str(
        "<the scenario in words: who is affected, the symptom (P99, goodput, cost) and what \
         triggered this tuning>\n\n",
    );
    o.line(format_args!("Measured scenario: {}.", scenario(input.baseline)));
    let _ = runs;
    o.push('\n');
}

/// The settings in which run `r` differs from the baseline `b`, named field by field:
/// `load.concurrency 64 -> 32`, `workload.dataset ...`, `slo.ttft_ms ...`, the model, the host.
pub fn scenario_differences(b: &Summary, r: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    for section in ["load", "workload", "slo"] {
        let flat =
            |s: &Summary| s.config.to_json().get(section).map(flatten_params).unwrap_or_default();
        let (fb, fr) = (flat(b), flat(r));
        let keys: std::collections::BTreeSet<&String> = fb.keys().chain(fr.keys()).collect();
        for k in keys {
            let (vb, vr) = (fb.get(k), fr.get(k));
            if vb != vr {
                let show = |v: Option<&Json>| v.map_or("(unset)".to_string(), toml_text);
                out.push(format!(
                    "{} {} -> {}",
                    code(&format!("{section}.{k}")),
                    show(vb),
                    show(vr)
                ));
            }
        }
    }
    // The same file named with other content: another workload.
    for fr in &r.workload.files {
        if let Some(fb) = b.workload.files.iter().find(|f| f.path == fr.path && f.hash != fr.hash) {
            out.push(format!(
                "workload file {} content {} -> {}",
                code(&fr.path),
                code(&fb.hash),
                code(&fr.hash)
            ));
        }
    }
    if b.target.model != r.target.model {
        out.push(format!("model {} -> {}", code(&b.target.model), code(&r.target.model)));
    }

    let host = |s: &Summary| {
        s.environment.hostname.clone().unwrap_or_else(|| s.environment_fingerprint.clone())
    };
    if host(b) != host(r) || b.environment_fingerprint != r.environment_fingerprint {
        out.push(format!("host {} -> {}", code(&host(b)), code(&host(r))));
    }
    out
}

/// The settings of a run's resolved profile that make its scenario (the shape and size of the
/// load, the dataset, the lengths): what its thresholds are scoped to besides the profile.
pub const SCENARIO_KEYS: [&str; 7] = [
    "load.mode",
    "load.concurrency",
    "load.rate",
    "load.arrival",
    "workload.dataset",
    "workload.input_lengths",
    "workload.max_tokens",
];

/// The [`SCENARIO_KEYS`] a run's resolved profile sets, with their TOML values.
pub fn scenario_settings(s: &Summary) -> Vec<(ConfigKey, toml::Value)> {
    let config = s.config.to_json();
    SCENARIO_KEYS
        .iter()
        .filter_map(|k| {
            let k = ConfigKey::literal(k);
            let v = k.get_json(&config)?;
            Some((k, json_to_toml(v)?))
        })
        .collect()
}

/// `value (+change, +change%)` against the baseline value; the value alone for the baseline
/// row or when either side was not measured.
fn change_cell(v: Option<f64>, base: Option<f64>, is_baseline: bool) -> String {
    match (v, base) {
        (Some(v), Some(b)) if !is_baseline && v == b => format!("{} (=)", sig_text(v)),
        (Some(v), Some(b)) if !is_baseline => {
            let d = v - b;
            let pct =
                if b != 0.0 { format!(", {:+.1}%", d / b.abs() * 100.0) } else { String::new() };
            format!("{} ({}{pct})", sig_text(v), signed_sig_text(d))
        }
        _ => cell(v),
    }
}

/// Changes smaller than this share of the baseline value are noise in a conclusion.
const NOISE: f64 = 0.01;

/// Which matrix metrics of row `i` are better and which are worse than the baseline's:
/// significantly so when both rows have intervals, else beyond [`NOISE`]: `(better, worse)`,
/// each `TTFT P99 (ms) -38.2%`.
fn verdicts(ctx: &Runs<'_>, i: usize) -> (Vec<String>, Vec<String>) {
    let (mut better, mut worse) = (Vec::new(), Vec::new());
    for (header, metric, _) in ctx.columns() {
        let (Some(vb), Some(vr), Some(def)) = (
            ctx.value(0, metric),
            ctx.value(i, metric),
            MetricPath::parse(metric).ok().map(MetricPath::def),
        ) else {
            continue;
        };
        let tested = match (ctx.estimate(0, metric), ctx.estimate(i, metric)) {
            (Some(a), Some(b)) if a.method.is_interval() && b.method.is_interval() => Some(
                compare_estimates(MetricPath::named(metric), Some(a), Some(b), ctx.confidence()).1,
            ),
            _ => None,
        };
        match tested {
            Some(Change::Better | Change::Worse) => {}
            Some(_) => continue,
            None if vb == 0.0 || ((vr - vb) / vb.abs()).abs() < NOISE => continue,
            None => {}
        }
        let name = header.split(" (").next().unwrap_or(header);
        // A change from 0 has no percentage: it is stated as the change itself.
        let text = if vb != 0.0 {
            format!("{name} {:+.1}%", (vr - vb) / vb.abs() * 100.0)
        } else {
            let sign = if vr > vb { "+" } else { "" };
            format!("{name} {sign}{} (from 0)", sig_text(vr - vb))
        };
        let lower_is_better = matches!(def.better, infergate_model::summary::Better::Lower);
        if (vr < vb) == lower_is_better { better.push(text) } else { worse.push(text) }
    }
    (better, worse)
}

/// The metrics matrix: one row per run, one column per [`MATRIX`] metric (plus the sweep's knee
/// and the acceptance verdicts when a run has them), and its legend.
fn matrix_section(o: &mut Body, ctx: &Runs<'_>) {
    let (runs, input) = (&ctx.all, ctx.input);
    let columns = ctx.columns();
    // Sweeps and acceptance runs add their columns (docs/acceptance.md).
    let has_knee = runs.iter().any(|r| r.extra.sweep.is_some());
    let has_acceptance = runs.iter().any(|r| r.extra.acceptance.is_some());
    let mut table = Table::new(
        [("Config", LEFT), ("Requests", RIGHT)]
            .into_iter()
            .chain(columns.iter().map(|(h, _, _)| (*h, RIGHT)))
            .chain(ctx.has_capacity().then_some((cap::COLUMN, RIGHT)))
            .chain(has_knee.then_some(("Knee", RIGHT)))
            .chain(has_acceptance.then_some(("Acceptance", LEFT)))
            .chain([("Conclusion", LEFT)]),
    );
    for (i, r) in runs.iter().enumerate() {
        let sim = if r.simulated { " (simulated)" } else { "" };
        let requests = match ctx.stats(i) {
            Some(st) if st.trials > 1 => format!("{} ({} trials)", st.requests, st.trials),
            _ => r.requests.total.to_string(),
        };
        let mut cells = vec![format!("{}{sim}", ctx.labels[i]), requests];
        cells.extend(columns.iter().map(|(_, metric, _)| matrix_cell(ctx, i, metric)));
        cells.extend(ctx.has_capacity().then(|| cap::cell(input.capacities, i)));
        cells.extend(has_knee.then(|| knee_cell(r)));
        cells.extend(has_acceptance.then(|| acceptance_cell(r)));
        cells.push(conclusion(ctx, i));
        table.row(cells);
    }
    o.table(table);
    let conclusion_rule = if ctx.has_stats() {
        format!(
            "the conclusion names the metrics significantly better or worse (a metric without \
             an interval: more than {}%)",
            sig_text(NOISE * 100.0)
        )
    } else {
        format!(
            "the conclusion names the metrics more than {}% better or worse",
            sig_text(NOISE * 100.0)
        )
    };
    o.line(format_args!(
        "\n`{BLANK}` = not measured. Each experiment's cell is its value, then its change against \
         the baseline (absolute, %; `=` unchanged); {conclusion_rule}. Requests are the measured \
         requests of the run, or of all its trials (warmup excluded). Goodput is the \
         share of measured requests that met the SLO (`goodput.ratio`); throughput is output \
         tokens per second; KV fragmentation is reported by the server; cost is per 1M output \
         tokens from the configured device price."
    ));
    if columns.iter().any(|c| c.1 == "goodput.token_ratio") {
        o.push_str(
            "Token goodput is the output tokens delivered to clients that stayed over those the \
             engine computed, from its counters (`goodput.token_ratio`; requests cancelled on \
             purpose count in the denominator only).\n",
        );
    }
    if columns.iter().any(|c| c.1 == "server.gpu.joules_per_1m_output_tokens") {
        o.push_str(
            "Energy is the GPUs' sampled power integrated over the measured window, per 1M \
             output tokens (`server.gpu.joules_per_1m_output_tokens`).\n",
        );
    }
    if ctx.has_stats() {
        stats_legend(o, ctx);
    }
    if ctx.has_capacity() {
        for line in cap::legend(input.capacities, &ctx.labels) {
            o.line(format_args!("\n{line}"));
        }
    }
    for (i, r) in runs.iter().enumerate().skip(1) {
        let diffs = scenario_differences(input.baseline, r);
        if !diffs.is_empty() {
            o.line(format_args!(
                "\n> **Not like for like:** {} differs from the baseline in {}: its row is not a \
                 comparison of the engine parameters alone.",
                ctx.labels[i],
                diffs.join(", ")
            ));
        }
    }
}

/// Row `i`'s Conclusion cell: whether it is chosen, then, for an experiment, the metrics
/// better and worse than the baseline's. Two rows measured by capacity searches compare their
/// capacity (a change only when the brackets separate), and their other metrics only when both
/// were probed at the same load.
fn conclusion(ctx: &Runs<'_>, i: usize) -> String {
    let verdict = match (i, ctx.input.choose) {
        (i, c) if i == c && i == 0 => "chosen: keep the baseline",
        (0, _) => "reference",
        (i, c) if i == c => "chosen",
        _ => "not chosen",
    };
    if i == 0 {
        return verdict.to_string();
    }
    let capacity = match (ctx.capacity(0), ctx.capacity(i)) {
        (Some(b), Some(r)) => {
            Some((cap::compare(b, r), b.probe().map(|p| p.load) == r.probe().map(|p| p.load)))
        }
        _ => None,
    };
    // Capacity rows probed at other loads: their other columns are not like for like.
    let other_loads = matches!(capacity, Some((_, false)));
    let (mut better, mut worse) =
        if other_loads { (Vec::new(), Vec::new()) } else { verdicts(ctx, i) };
    let mut extra = Vec::new();
    match capacity {
        Some((cap::Comparison::Higher(t), _)) => better.insert(0, t),
        Some((cap::Comparison::Lower(t), _)) => worse.insert(0, t),
        Some((cap::Comparison::Overlap(t) | cap::Comparison::Other(t), _)) => extra.push(t),
        None => {}
    }
    if other_loads {
        extra.push("other columns probed at other loads, not compared".to_string());
    }
    let mut why = Vec::new();
    if !better.is_empty() {
        why.push(format!("better: {}", better.join(", ")));
    }
    if !worse.is_empty() {
        why.push(format!("worse: {}", worse.join(", ")));
    }
    why.extend(extra);
    if !why.is_empty() {
        format!("{verdict}: {}", why.join("; "))
    } else if ctx.has_stats() {
        format!("{verdict}: no significant change at {}%", sig_text(ctx.confidence() * 100.0))
    } else {
        format!("{verdict}: within {}% of the baseline", sig_text(NOISE * 100.0))
    }
}

/// Under the matrix of rows with estimates: what `±`, `*` and `~` mean, how the changes were
/// tested, and why a value is blank.
fn stats_legend(o: &mut Body, ctx: &Runs<'_>) {
    let pct = sig_text(ctx.confidence() * 100.0);
    o.line(format_args!(
        "\nEach value is an estimate `value ± half-width` of its {pct}% confidence interval: \
         for a trial set the Student t interval across its trials (run-to-run variance \
         counted); for one run the bootstrap of its requests (`~`: run-to-run variance not \
         counted, so another run may differ by more). `*`: a percentile from fewer requests than \
         it needs (P99 from fewer than 100 per trial is the slowest request). A change is \
         *significant* when Welch's {pct}% interval of the difference leaves 0 out; then, and \
         only then, the conclusion counts it. Counts are shown as measured. Methods: \
         docs/statistics.md."
    ));
    let trials: Vec<String> = (0..ctx.all.len())
        .filter_map(|i| {
            let st = ctx.stats(i)?;
            Some(format!(
                "{} {} ({} measured requests)",
                ctx.labels[i],
                if st.trials == 1 { "1 run".to_string() } else { format!("{} trials", st.trials) },
                st.requests
            ))
        })
        .collect();
    o.line(format_args!("\nTrials behind each row: {}.", trials.join(", ")));
    for (i, label) in ctx.labels.iter().enumerate() {
        if let Some(note) = ctx.stats(i).and_then(|st| st.cold_start.as_deref()) {
            o.line(format_args!(
                "\n> **Cold start:** {label}: {note}. Its estimates include that trial, so its \
                 intervals and the limits proposed from them are wider than the engine's warm \
                 behaviour."
            ));
        }
    }
    // Per row, the metrics without an interval grouped by the reason.
    let mut blanks: Vec<String> = Vec::new();
    for (i, label) in ctx.labels.iter().enumerate() {
        let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (header, metric, _) in ctx.columns() {
            let Some(me) = ctx.stats(i).and_then(|st| st.estimates.get(metric)) else { continue };
            if let Some(why) = me.blank.as_deref().filter(|w| *w != "not measured") {
                by_reason.entry(why).or_default().push(header.split(" (").next().unwrap_or(header));
            }
        }
        for (why, headers) in by_reason {
            blanks.push(format!("- {label}: {} ({why})", headers.join(", ")));
        }
    }
    if !blanks.is_empty() {
        o.push_str("\nWithout an interval:\n\n");
        for b in blanks {
            o.line(format_args!("{b}"));
        }
    }
}

/// Notes under the matrix: simulated runs, runs that did not complete, cost bases.
fn run_notes(o: &mut Body, ctx: &Runs<'_>) {
    let runs = &ctx.all;
    let simulated: Vec<String> = runs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.simulated)
        .map(|(i, _)| ctx.labels[i].clone())
        .collect();
    if !simulated.is_empty() {
        o.line(format_args!("\n> **Simulated:** {} ran against the built-in engine simulator, a model of an engine: \
             the numbers describe the simulator, not real hardware.",
            simulated.join(", ")));
    }
    let plateau: Vec<String> = runs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.gates_on_plateau())
        .map(|(i, r)| format!("{} ({})", ctx.labels[i], code(&r.run_id)))
        .collect();
    if !plateau.is_empty() {
        o.line(format_args!("\n> **Plateau:** the figures of {} are those of each run's plateau (its profile's `steady.gate`): the requests sent while the load held its target, ramp-up and drain left out ([metrics](../metrics.md#steady-state)).",
            plateau.join(", ")));
    }
    for (i, r) in runs.iter().enumerate() {
        if let Some(c) = r.config.imported() {
            imported_note(o, &ctx.labels[i], r, c);
        }
    }
    for (i, r) in runs.iter().enumerate() {
        if r.status != infergate_model::summary::RunStatus::Complete {
            let what = match r.status {
                infergate_model::summary::RunStatus::Interrupted => {
                    "was interrupted: its numbers cover part of the planned load"
                }
                infergate_model::summary::RunStatus::Aborted => {
                    "was aborted by an error of the bench (see its notes): its numbers cover part of the planned load"
                }
                infergate_model::summary::RunStatus::Oversaturated => {
                    "was stopped early, over-saturated (see its notes): its numbers cover the load until the server fell behind its schedule"
                }
                _ => "failed: no measured request succeeded",
            };
            o.line(format_args!("\n> {} ({}) {what}.", ctx.labels[i], code(&r.run_id)));
        }
    }
    for line in ctx.input.considered {
        o.line(format_args!("\n> {line}"));
    }
    // The bench's own timing error on the host of each run (`environment.selftest`), when a
    // recent self-test was recorded: one line per self-test, naming the runs that rest on it.
    let mut floors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        if let Some(t) = &r.environment.selftest {
            floors.entry(t.floor_line()).or_default().push(ctx.labels[i].clone());
        }
    }
    for (floor, labels) in &floors {
        o.line(format_args!("\n> Measurement floor of {}: {floor}.", labels.join(", ")));
    }
    let mut bases: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        if let (Some(basis), Some(_)) = (&r.cost.basis, r.cost.per_1m_output_tokens) {
            bases.entry(basis.as_str()).or_default().push(ctx.labels[i].clone());
        }
    }
    for (basis, labels) in &bases {
        o.line(format_args!("\nCost basis {basis}: {}.", labels.join(", ")));
    }
}

/// The note on a run imported from another tool's results: the tool, the file and where its
/// definitions differ from infergate's.
fn imported_note(
    o: &mut Body,
    label: &str,
    r: &Summary,
    c: &infergate_model::imported::ImportedConfig,
) {
    let src = &c.imported;
    let version = src.tool_version.as_deref().map(|v| format!(" {v}")).unwrap_or_default();
    let files: Vec<String> =
        src.files.iter().map(|f| format!("{} ({})", code(&f.path), code(&f.hash))).collect();
    o.line(format_args!(
        "\n> **Imported:** {label} ({}) was measured by {}{version}, not by infergate: imported \
         with `cargo xtask import` from {}. Its definitions differ: {}.",
        code(&r.run_id),
        src.tool,
        files.join(", "),
        src.definitions.join("; ")
    ));
}

/// Each experiment's engine parameter changes against the baseline; a run of a generated
/// variant (a strategy comparison's) shows its changes against the governed file it derives
/// from instead, each key added there or changed, and so does the baseline when it is one.
fn param_changes(o: &mut Body, ctx: &Runs<'_>) {
    let input = ctx.input;
    if input.experiments.is_empty() {
        return;
    }
    let any_derived = ctx.all.iter().any(|r| derivation(r).is_some());
    o.push_str(if any_derived {
        "\nParameter changes (a run of a generated engine config: against the governed file it \
         derives from, which is where the change is made; any other run: against the baseline):\n\n"
    } else {
        "\nParameter changes against the baseline:\n\n"
    });
    let mut table = Table::new([("Config", LEFT), ("Changes", LEFT)]);
    let mut file_to_file = Vec::new();
    for (i, r) in ctx.all.iter().enumerate() {
        let label = &ctx.labels[i];
        if let Some((governed, changes)) = derivation(r) {
            let ran = r.engine.as_ref().map_or(String::new(), |e| e.file.clone());
            let items: Vec<String> = changes.iter().map(derived_change_text).collect();
            let what = if items.is_empty() { "none".to_string() } else { items.join("<br>") };
            let text = format!("in {} (ran {}): {what}", code(governed), code(&ran));
            table.row(vec![label.clone(), text]);
            continue;
        }
        if i == 0 {
            continue;
        }
        let files = param_files(input.baseline, r);
        let text = match param_diff(input.baseline, r) {
            None => "not recorded (a run has no engine parameters)".to_string(),
            Some((_, d)) if d.changed.is_empty() && d.removed.is_empty() => "none".to_string(),
            Some((file, d)) => {
                let base_file = files.as_ref().map_or(file.clone(), |(b, _)| b.clone());
                if base_file != file {
                    file_to_file.push((label.clone(), base_file.clone(), file.clone()));
                }
                // Same file: `file: key`: `old` -> `new`. Two files: each side names its own.
                let show = |k: &str, old: String, new: String| {
                    if base_file == file {
                        format!(
                            "{}: {} -> {}",
                            code(&format!("{file}: {k}")),
                            code(&old),
                            code(&new)
                        )
                    } else {
                        format!(
                            "{} -> {}",
                            code(&format!("{base_file}: {k} = {old}")),
                            code(&format!("{file}: {k} = {new}"))
                        )
                    }
                };
                let mut items: Vec<String> = d
                    .changed
                    .iter()
                    .map(|(k, old, new)| {
                        let old = old.as_ref().map_or("(unset)".to_string(), toml_text);
                        show(k, old, toml_text(new))
                    })
                    .collect();
                items.extend(
                    d.removed.iter().map(|(k, old)| show(k, toml_text(old), "(unset)".into())),
                );
                items.join("<br>")
            }
        };
        table.row(vec![label.clone(), text]);
    }
    o.table(table);
    for (l, base_file, file) in file_to_file {
        o.line(format_args!(
            "\n> {l} ran with {}, the baseline with {}: its changes are file to file, each \
             value with the file it is in.",
            code(&file),
            code(&base_file)
        ));
    }
}

/// The Decision section; returns the baseline values that rolling back restores.
fn decision_section(o: &mut Body, ctx: &Runs<'_>) -> Vec<String> {
    let rollback_values = match derivation(ctx.chosen) {
        Some((governed, changes)) => adopt_derived(o, ctx, governed, changes),
        None if ctx.input.choose == 0 => keep_baseline(o, ctx),
        None => adopt_chosen(o, ctx),
    };
    o.push('\n');
    rollback_values
}

/// The values the decision makes mandatory, as the decision section writes them: the file
/// they are made in and each `(key, value)`.
fn decided_values(
    baseline: &Summary,
    chosen: &Summary,
    choose: usize,
) -> Option<(String, Vec<(String, Json)>)> {
    if let Some((governed, changes)) = derivation(chosen) {
        let values = changes.iter().map(|c| (c.key.clone(), c.to.clone())).collect();
        return Some((governed.to_string(), values));
    }
    if choose == 0 {
        let e = baseline.engine.as_ref()?;
        return Some((e.file.clone(), flatten_params(&e.params).into_iter().collect()));
    }
    let (file, d) = param_diff(baseline, chosen)?;
    Some((file, d.changed.into_iter().map(|(k, _, new)| (k, new)).collect()))
}

/// Refuse a decision line the chosen run's server contradicts (`summary.engine.served`): the
/// record would decide a value nobody measured. Checked before anything is written.
pub fn served_check(
    baseline: &Summary,
    experiments: &[Summary],
    choose: usize,
) -> Result<(), NewAdrError> {
    let Some(chosen) = choose.checked_sub(1).map_or(Some(baseline), |i| experiments.get(i)) else {
        return Ok(());
    };
    let Some(served) = chosen.engine.as_ref().map(|e| e.served.as_slice()) else {
        return Ok(());
    };
    let Some((file, values)) = decided_values(baseline, chosen, choose) else { return Ok(()) };
    let mut lines = Vec::new();
    for (key, value) in values {
        // A key that is no dotted key is none a server answers for.
        let contradicted = ConfigKey::parse(&key)
            .ok()
            .and_then(|k| infergate_model::served::contradicting(&k, &value, served));
        if let Some(s) = contradicted {
            let decided = json_to_toml(&value).map_or_else(|| value.to_string(), |t| t.to_string());
            lines.push(format!(
                "{}: the server ran {key} = {} ({})",
                code(&format!("{file}: {key} = {decided}")),
                infergate_model::served::show(&s.value),
                s.source
            ));
        }
    }
    if !lines.is_empty() {
        return Err(NewAdrError::ServedContradicts { run: code(&chosen.run_id), lines });
    }
    Ok(())
}

const FILL_IN_DECISION: &str = "<name the governed values this record fixes, one `configs/<file>.toml: section.key = value` line each>";

/// The objectives of the SLO the chosen run missed: `TTFT P99 1012 ms above the SLO's 500 ms`.
pub fn slo_misses(r: &Summary) -> Vec<String> {
    slo_misses_of(r, |m| r.gated_metric(MetricPath::named(m)))
}

/// [`slo_misses`] with each value from `value` (a row's estimate).
fn slo_misses_of(r: &Summary, value: impl Fn(&str) -> Option<f64>) -> Vec<String> {
    let slo = &r.goodput.slo;
    let mut out = Vec::new();
    for (name, metric, limit) in [
        ("TTFT P99", "metrics.ttft_ms.p99", slo.ttft_ms),
        ("TPOT P99", "metrics.tpot_ms.p99", slo.tpot_ms),
        ("E2E P99", "metrics.e2e_ms.p99", slo.e2e_ms),
    ] {
        if let (Some(limit), Some(v)) = (limit, value(metric))
            && v > limit
        {
            out.push(format!("{name} {} ms above the SLO's {} ms", sig_text(v), sig_text(limit)));
        }
    }
    out
}

fn slo_flag(o: &mut Body, ctx: &Runs<'_>) {
    let who = format!("{}, the chosen configuration,", ctx.chosen_label);
    slo_flag_for(o, ctx, ctx.input.choose, &who);
}

/// Under the decision: the flag and a placeholder for the reason when row `i` misses its SLO
/// (its estimates, when it has them; lint keeps the record from acceptance until a person has
/// written the reason).
fn slo_flag_for(o: &mut Body, ctx: &Runs<'_>, i: usize, who: &str) {
    let r = ctx.all[i];
    let misses = slo_misses_of(r, |m| ctx.value(i, m));
    if misses.is_empty() {
        return;
    }
    let goodput = ctx
        .value(i, "goodput.ratio")
        .map_or(String::new(), |g| format!(" (goodput {})", sig_text(g)));
    o.line(format_args!(
        "\n{SLO_MISSED} {who} measured {}{goodput}.\n\n{SLO_EXCEPTION} <why this configuration \
         is adopted although it misses the SLO>\n",
        misses.join(", ")
    ));
}

/// The decision to keep the baseline: every recorded parameter becomes mandatory.
fn keep_baseline(o: &mut Body, ctx: &Runs<'_>) -> Vec<String> {
    let input = ctx.input;
    let fill_in = FILL_IN_DECISION;
    o.line(format_args!("Keep the baseline configuration (run {}).", code(&input.baseline.run_id)));
    slo_flag_for(o, ctx, 0, "the baseline");
    match &input.baseline.engine {
        Some(e) => {
            o.push_str("These values are now mandatory:\n\n");
            for (k, v) in flatten_params(&e.params) {
                match json_to_toml(&v) {
                    Some(t) => o.line(format_args!("- {}: {k} = {t}", e.file)),
                    None => o.line(format_args!(
                        "- {} (null in the run, not a TOML value)",
                        code(&format!("{}: {k}", e.file))
                    )),
                }
            }
        }
        None => o.line(format_args!("\nThe run recorded no engine parameters.\n\n{fill_in}")),
    }
    Vec::new()
}

/// The decision to adopt a run of a generated engine config (a strategy comparison's): its
/// changes against the governed file it derives from become mandatory in that file, each said
/// to be added there (the file does not set it yet) or changed; returns what rolling back
/// restores in the governed file.
fn adopt_derived(
    o: &mut Body,
    ctx: &Runs<'_>,
    governed: &str,
    changes: &[infergate_model::summary::ParamChange],
) -> Vec<String> {
    let (chosen, label) = (ctx.chosen, &ctx.chosen_label);
    let ran = chosen.engine.as_ref().map_or(String::new(), |e| e.file.clone());
    if ctx.input.choose == 0 {
        o.line(format_args!(
            "Keep the baseline configuration, {label} (run {}).",
            code(&chosen.run_id)
        ));
    } else {
        o.line(format_args!("Adopt {label} (run {}).", code(&chosen.run_id)));
    }
    slo_flag(o, ctx);
    if changes.is_empty() {
        o.line(format_args!(
            "\n{label} ran {}, generated from {} with the same values: nothing changes in the \
             governed file.\n\n{FILL_IN_DECISION}",
            code(&ran),
            code(governed)
        ));
        return Vec::new();
    }
    o.line(format_args!(
        "{label} ran {}, generated from {}: the change is made in {}. These values are now \
         mandatory:\n",
        code(&ran),
        code(governed),
        code(governed)
    ));
    let mut rollback = Vec::new();
    for c in changes {
        match json_to_toml(&c.to) {
            Some(t) => o.line(format_args!("- {governed}: {} = {t}", c.key)),
            None => o.line(format_args!(
                "- {} (null in the run, not a TOML value)",
                code(&format!("{governed}: {}", c.key))
            )),
        }
        rollback.push(match &c.from {
            None => format!("remove {} from {}", code(&c.key), code(governed)),
            Some(old) => code(&format!("{governed}: {} = {}", c.key, toml_text(old))),
        });
    }
    let keys = |added: bool| -> Vec<String> {
        changes.iter().filter(|c| c.from.is_none() == added).map(|c| code(&c.key)).collect()
    };
    let (added, changed) = (keys(true), keys(false));
    if !added.is_empty() {
        o.line(format_args!(
            "\nAdded to {}, which does not set {} yet: {}.",
            code(governed),
            if added.len() == 1 { "it" } else { "them" },
            added.join(", ")
        ));
    }
    if !changed.is_empty() {
        let sep = if added.is_empty() { "\n" } else { "" };
        o.line(format_args!("{sep}Changed in {}: {}.", code(governed), changed.join(", ")));
    }
    rollback
}

/// The decision to adopt the chosen experiment: its changes against the baseline become
/// mandatory; returns the baseline values that rolling back restores.
fn adopt_chosen(o: &mut Body, ctx: &Runs<'_>) -> Vec<String> {
    let (input, chosen, chosen_label) = (ctx.input, ctx.chosen, &ctx.chosen_label);
    let fill_in = FILL_IN_DECISION;
    let mut rollback_values: Vec<String> = Vec::new();
    o.line(format_args!("Adopt {chosen_label} (run {}).", code(&chosen.run_id)));
    slo_flag(o, ctx);
    match param_diff(input.baseline, chosen) {
        Some((file, d)) if !(d.changed.is_empty() && d.removed.is_empty()) => {
            let base_file = param_files(input.baseline, chosen).map_or(file.clone(), |(b, _)| b);
            if base_file != file {
                o.line(format_args!(
                    "The change is made in {}, the engine config {chosen_label} ran with (the \
                     baseline ran with {}).",
                    code(&file),
                    code(&base_file)
                ));
            }
            o.push_str("These values are now mandatory:\n\n");
            for (k, old, new) in &d.changed {
                match json_to_toml(new) {
                    Some(t) => {
                        o.line(format_args!("- {file}: {k} = {t}"));
                        for (source, _) in input.sources.iter().filter(|(_, keys)| keys.contains(k))
                        {
                            o.line(format_args!("- {source}: {k} = {t}"));
                        }
                    }
                    None => o.line(format_args!(
                        "- {} (null in the run, not a TOML value)",
                        code(&format!("{file}: {k}"))
                    )),
                }
                // The value to restore is the baseline's, in the baseline's file.
                rollback_values.push(match old {
                    Some(old) => code(&format!("{base_file}: {k} = {}", toml_text(old))),
                    None if base_file == file => format!("remove {} from {}", code(k), code(&file)),
                    None => format!(
                        "remove {} from {} ({} does not set it)",
                        code(k),
                        code(&file),
                        code(&base_file)
                    ),
                });
            }
            for (k, old) in &d.removed {
                o.line(format_args!("- {file}: {k} removed"));
                rollback_values.push(code(&format!("{base_file}: {k} = {}", toml_text(old))));
            }
            if !d.removed.is_empty() {
                o.push_str("\nA removed key takes the engine's default.\n");
            }
        }
        Some(_) => o.line(format_args!(
            "\n{chosen_label} recorded the same engine parameters as the baseline.\n\n{fill_in}"
        )),
        None => o.line(format_args!("\nA run recorded no engine parameters.\n\n{fill_in}")),
    }
    rollback_values
}

/// The CI gate thresholds proposed from the chosen run; returns them.
fn thresholds_section(o: &mut Body, ctx: &Runs<'_>) -> Vec<Proposed> {
    let (input, chosen, chosen_label) = (ctx.input, ctx.chosen, &ctx.chosen_label);
    thresholds_rule(o, ctx);
    let chosen_i = input.choose;
    o.line(format_args!(
        "They gate runs of bench profile {}, the profile {chosen_label} was measured with \
         (`cargo xtask bench --profile {} --gate`).",
        code(&chosen.profile),
        chosen.profile
    ));
    let environment = EnvironmentKey::of(chosen);
    o.line(format_args!(
        "They hold for the environment {chosen_label} was measured on, {} (the Environment \
         column): a run on another GPU, engine, model or dtype is not gated by them (`gate` \
         says `no record for this environment` until a record for its environment is accepted).",
        code(&environment.to_string())
    ));
    let scenario = scenario_settings(chosen);
    if !scenario.is_empty() {
        o.line(format_args!(
            "Scenario: {} (a run of the profile with other values is not this scenario: the gate \
             names the settings that differ and fails it).",
            scenario
                .iter()
                .map(|(k, v)| code(&format!("{k} = {v}")))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let mut proposed = Vec::new();
    let mut unmeasured = Vec::new();
    let mut unbreakable = Vec::new();
    for (header, metric, action) in ctx.columns() {
        let p = match ctx.estimate(chosen_i, metric) {
            Some(e) => propose_from_estimate(MetricPath::named(metric), e, action, input.headroom),
            // A trial set's metric without an estimate: its trials are not pooled.
            None if ctx.stats(chosen_i).is_some_and(|st| st.trials > 1) => None,
            None => propose(chosen, MetricPath::named(metric), action, input.headroom),
        };
        match p {
            Some(p) => {
                match crate::thresholds::propose::unbreakable(p.metric, p.comparator, p.limit) {
                    Some(why) => unbreakable.push(format!("{header} ({why})")),
                    None => proposed.push(p),
                }
            }
            None => unmeasured.push(header),
        }
    }
    if !unmeasured.is_empty() {
        o.line(format_args!(
            "No threshold for what {chosen_label} did not measure: {}.",
            unmeasured.join(", ")
        ));
    }
    if !unbreakable.is_empty() {
        o.line(format_args!(
            "No threshold where the interval leaves no limit a run could break: {}. Measure more \
             trials (a narrower interval) or set a limit by hand with its reason.",
            unbreakable.join("; ")
        ));
    }
    let held = ctx.capacity(chosen_i).map(cap::held_at).unwrap_or_default();
    if let Some(rule) = ctx
        .capacity(chosen_i)
        .filter(|_| !held.is_empty())
        .and_then(|c| cap::held_at_rule(c, chosen_label, &chosen.profile))
    {
        o.line(format_args!("{rule}"));
    }
    thresholds_table(o, ctx, &proposed, &held);
    detects_statement(o, &proposed);
    let blocking = proposed.iter().filter(|p| p.action == Action::Block).count();
    super::budgets::render(o, &budget_proposals(ctx, blocking), chosen_label);
    o.push_str("\nThe SLO column is the profile's goodput objective for that metric, side by side with the limit.\n");
    o.push('\n');
    proposed
}

/// The regression budgets of the chosen row's trial set (`super::budgets`), with the measured
/// change against the baseline; none for a single run.
fn budget_proposals(ctx: &Runs<'_>, blocking: usize) -> Vec<super::budgets::ProposedBudget> {
    let i = ctx.input.choose;
    let Some(st) = ctx.stats(i).filter(|st| st.trials > 1) else { return Vec::new() };
    ctx.columns()
        .into_iter()
        .filter_map(|(_, metric, action)| {
            let per_trial = &st.estimates.get(metric)?.per_trial;
            let measured = match (ctx.estimate(0, metric), ctx.estimate(i, metric)) {
                (Some(a), Some(b)) if i != 0 && a.value != 0.0 => {
                    infergate_model::stats::difference(a, b, ctx.confidence()).ok().map(|d| {
                        let rel = |v: f64| v / a.value.abs();
                        (rel(d.absolute), d.lo.map(rel), d.hi.map(rel))
                    })
                }
                _ => None,
            };
            super::budgets::propose(
                MetricPath::named(metric),
                action,
                per_trial,
                blocking,
                measured,
            )
        })
        .collect()
}

/// How the limits were proposed: from estimates (and a warning for a single run), or from
/// values alone.
fn thresholds_rule(o: &mut Body, ctx: &Runs<'_>) {
    let (input, chosen_label) = (ctx.input, &ctx.chosen_label);
    let h = sig_text(input.headroom * 100.0);
    let chosen_i = input.choose;
    if ctx.has_stats() {
        let pct = sig_text(ctx.confidence() * 100.0);
        o.line(format_args!(
            "Proposed from {chosen_label}'s estimates ({pct}% intervals): lower is better: the \
             interval's upper end + {h}% of the estimate, `<=`; higher is better: its lower end \
             - {h}% of the estimate, `>=`; rounded away from the estimate to {LIMIT_DIGITS} \
             significant digits. A limit is never inside the interval, so it is never tighter \
             than the measured noise allows. A count gets the worst trial's value with {h}% \
             headroom; a value without an interval the value with {h}% headroom. Detects: the \
             smallest regression a gate of as many trials fails with {}% power at the measured \
             noise (docs/statistics.md); a larger change is caught, a smaller one may pass.",
            sig_text(DETECT_POWER * 100.0)
        ));
        if ctx.stats(chosen_i).is_some_and(|st| st.trials == 1) {
            o.line(format_args!(
                "\n> **One run:** {chosen_label} is a single run, so its intervals count only the \
                 spread between its requests: the run-to-run noise is not in these limits, and \
                 an unchanged configuration may fail them. Measure trials (`cargo xtask bench \
                 --trials 3`) and write the record from the trial set.\n"
            ));
        }
    } else {
        o.line(format_args!("Proposed from {chosen_label}'s measured values with {h}% headroom in each metric's worse \
             direction (lower is better: value x (1 + {h}%), `<=`; higher is better: value x (1 - {h}%), \
             `>=`), rounded away from the measured value to {LIMIT_DIGITS} significant digits."));
    }
}

/// The thresholds table: each proposed limit with its evidence (the estimate and what it
/// detects, when the rows have estimates) and the SLO beside it; then the "holds the SLO at
/// load L" rows of a chosen capacity search, in an `At load` column the others leave blank.
fn thresholds_table(o: &mut Body, ctx: &Runs<'_>, proposed: &[Proposed], held: &[cap::HeldAt]) {
    let chosen = ctx.chosen;
    let slo = &chosen.goodput.slo;
    let slo_of = |metric: &str| match metric {
        "metrics.ttft_ms.p99" => slo.ttft_ms,
        "metrics.tpot_ms.p99" => slo.tpot_ms,
        "metrics.e2e_ms.p99" => slo.e2e_ms,
        _ => None,
    };
    let evidence: &[&str] = if ctx.has_stats() { &["Estimate", "Detects"] } else { &[] };
    let head = ["Metric", "Comparator", "Limit", "Unit", "Action"].iter().chain(evidence);
    let environment = code(&EnvironmentKey::of(chosen).to_string());
    let at_load: &[&str] = if held.is_empty() { &[] } else { &["At load"] };
    let mut table =
        Table::new(head.chain(&["SLO", "Environment"]).chain(at_load).map(|h| (*h, LEFT)));
    o.push('\n');
    for p in proposed {
        let slo_cell = match slo_of(p.metric.as_str()) {
            Some(s) if p.limit > s => format!("{} ms (the limit is above it)", sig_text(s)),
            Some(s) => format!("{} ms", sig_text(s)),
            None => BLANK.to_string(),
        };
        let evidence = if ctx.has_stats() {
            let est = p.estimate.as_ref().map_or_else(
                || format!("{} (no interval)", sig_text(p.measured)),
                |e| {
                    let n = if e.trials == 1 {
                        format!("1 run, {} requests", e.requests)
                    } else {
                        format!("{} trials", e.trials)
                    };
                    format!("{} ({n})", e.short())
                },
            );
            let detects = match &p.detects {
                Some(d) if d.relative.is_finite() => {
                    let sign = if p.comparator.breaking_side() == "above" { "+" } else { "-" };
                    format!("{sign}{}%", sig_text((d.relative * 100.0).max(0.0)))
                }
                Some(_) => "no regression (noise too large)".to_string(),
                None if p.estimate.as_ref().is_some_and(|e| e.method.is_interval())
                    && p.limit == 0.0 =>
                {
                    "no regression (the limit is the metric's floor)".to_string()
                }
                None => BLANK.to_string(),
            };
            vec![est, detects]
        } else {
            Vec::new()
        };
        let mut cells = vec![
            code(p.metric.as_str()),
            p.comparator.to_string(),
            p.limit.to_string(),
            p.unit.to_string(),
            p.action.to_string(),
        ];
        cells.extend(evidence);
        cells.push(slo_cell);
        cells.push(environment.clone());
        cells.extend(at_load.iter().map(|_| BLANK.to_string()));
        table.row(cells);
    }
    for h in held {
        let mut cells = vec![
            code(h.metric.as_str()),
            h.comparator.to_string(),
            h.limit.to_string(),
            h.unit.to_string(),
            cap::HELD_AT_ACTION.to_string(),
        ];
        if ctx.has_stats() {
            cells.extend([h.evidence.clone(), BLANK.to_string()]);
        }
        cells.extend([BLANK.to_string(), environment.clone(), code(&h.load.to_string())]);
        table.row(cells);
    }
    o.table(table);
}

/// The smallest regressions the blocking thresholds catch at the measured noise.
fn detects_statement(o: &mut Body, proposed: &[Proposed]) {
    let detects: Vec<String> = proposed
        .iter()
        .filter(|p| p.action == Action::Block)
        .filter_map(|p| {
            let d = p.detects.as_ref()?;
            let label = all_columns()
                .find(|(_, m, _)| *m == p.metric.as_str())
                .map_or(p.metric.as_str(), |m| m.0.split(" (").next().unwrap_or(m.0));
            Some(if d.relative.is_finite() {
                format!("{label} {}% worse", sig_text((d.relative * 100.0).max(0.0)))
            } else {
                format!("{label}: none (the noise is as large as the value)")
            })
        })
        .collect();
    if !detects.is_empty() {
        o.line(format_args!(
            "\nAt the measured noise the blocking thresholds catch, with {}% power, a regression \
             of at least: {}. Smaller regressions may pass; more trials narrow the intervals.",
            sig_text(DETECT_POWER * 100.0),
            detects.join(", ")
        ));
    }
}

/// A latency quantile condition of a simulated run moved onto the bucket bound the engine's
/// histogram can decide (the simulator exports vLLM's buckets): the lowest bound at or above
/// the gate's limit; what was done, or why it cannot be, for the condition's comment.
fn on_engine_buckets(c: &mut RollbackCondition) -> Option<String> {
    use crate::thresholds::series::resolvable_limit;
    use infergate_model::EngineKind;
    match resolvable_limit(c, EngineKind::Vllm)? {
        Ok((bound, _)) if (bound - c.limit).abs() < 1e-9 => None,
        Ok((bound, family)) => {
            let gate = sig_text(c.limit);
            c.limit = bound;
            Some(format!(
                "the gate's {gate} {} lies inside a bucket of {family}: {} is the lowest limit \
                 the engine's histogram decides",
                c.unit,
                sig_text(bound)
            ))
        }
        Err(why) => Some(format!("not decidable on the engine's buckets: {why}")),
    }
}

/// Extra words under the conditions of a run against a real server: on which bucket bound
/// each engine decides its latency quantiles (the engine is not known from the runs).
fn bucket_sentence(proposed: &[Proposed]) -> Option<String> {
    use crate::thresholds::series::resolvable_limit;
    use infergate_model::EngineKind;
    let mut parts = Vec::new();
    for p in proposed {
        let Some(comparator) = breaking(p.comparator) else { continue };
        let c = RollbackCondition {
            metric: p.metric,
            comparator,
            limit: p.limit,
            unit: p.unit.to_string(),
            window: DEFAULT_WINDOW,
            action: RollbackAction::RollBack,
            note: None,
            line: 0,
        };
        let on: Vec<String> = [EngineKind::Vllm, EngineKind::Sglang]
            .into_iter()
            .filter_map(|e| match resolvable_limit(&c, e)? {
                Ok((b, _)) => Some(format!("{} {} on {}", sig_text(b), p.unit, e.as_str())),
                Err(_) => Some(format!("not at all on {}", e.as_str())),
            })
            .collect();
        if !on.is_empty() {
            parts.push(format!("`{}` at {}", p.metric, on.join(", ")));
        }
    }
    (!parts.is_empty()).then(|| {
        format!(
            "The deployed engine decides a latency quantile only on its histogram's bucket \
             bounds (docs/alerts.md): on the default buckets, {}. `adr alerts` and `watch` \
             state the effective limit; a limit on a bound is decided exactly.",
            parts.join("; ")
        )
    })
}

/// Rollback conditions: the proposed thresholds as conditions, and the values to restore.
fn rollback_section(
    o: &mut Body,
    ctx: &Runs<'_>,
    proposed: &[Proposed],
    rollback_values: &[String],
) {
    let chosen_label = &ctx.chosen_label;
    // Each threshold as a rollback condition on its breaking side (`<=` 302 -> above 302),
    // held for the default window; `adr alerts` and `watch` read them back.
    let condition = |p: &&Proposed, action: RollbackAction| {
        let Some(comparator) = breaking(p.comparator) else { return String::new() };
        let mut c = RollbackCondition {
            metric: p.metric,
            comparator,
            limit: p.limit,
            unit: p.unit.to_string(),
            window: DEFAULT_WINDOW,
            action,
            note: None,
            line: 0,
        };
        let bucket = ctx.chosen.simulated.then(|| on_engine_buckets(&mut c)).flatten();
        let bucket = bucket.map(|b| format!("; {b}")).unwrap_or_default();
        format!("- {} (measured {} in {chosen_label}{bucket})\n", c.render(), sig_text(p.measured))
    };
    let blocks: Vec<_> = proposed.iter().filter(|p| p.action == Action::Block).collect();
    let warns: Vec<_> = proposed.iter().filter(|p| p.action == Action::Warn).collect();
    if blocks.is_empty() {
        o.push_str(
            "No blocking threshold could be proposed (nothing was measured): roll back when a \
             gate run of this scenario fails.\n",
        );
    } else {
        o.push_str(
            "Roll back when a gate run of this scenario (`cargo xtask gate RUN`) breaks a \
             blocking threshold, or when the deployed engine's metrics (`cargo xtask adr \
             alerts`, `cargo xtask watch`) break it for the window:\n\n",
        );
        o.extend(blocks.iter().map(|p| condition(p, RollbackAction::RollBack)));
        if !ctx.chosen.simulated
            && let Some(sentence) = bucket_sentence(proposed)
        {
            o.line(format_args!("\n{sentence}"));
        }
    }
    if !warns.is_empty() {
        o.push_str("\nInvestigate, without rolling back, when a warning threshold breaks:\n\n");
        o.extend(warns.iter().map(|p| condition(p, RollbackAction::Investigate)));
    }
    held_at_rollback(o, ctx);
    if rollback_values.is_empty() {
        o.push_str("\nRolling back means reverting the change that broke the threshold: this record keeps the baseline configuration.\n\n");
    } else {
        match derivation(ctx.chosen) {
            Some((governed, _)) => o.line(format_args!(
                "\nRolling back restores {} as it was before this record:\n",
                code(governed)
            )),
            None => o.push_str("\nRolling back restores the baseline values:\n\n"),
        }
        for v in rollback_values {
            o.line(format_args!("- {v}"));
        }
        o.push('\n');
    }
}

/// Under the rollback conditions of a record that holds the SLO at a load: when that rolls
/// back, in prose (no alert evaluates it, so it is no condition line).
fn held_at_rollback(o: &mut Body, ctx: &Runs<'_>) {
    let Some(row) = ctx.capacity(ctx.input.choose) else { return };
    let (Some(load), false) = (row.held_load(), cap::held_at(row).is_empty()) else { return };
    o.line(format_args!(
        "\nRoll back, too, when a gate run at {load} (`{}`) decides that the SLO no longer holds \
         there ({}): no alert evaluates it, since production traffic does not run at a chosen \
         load.",
        crate::thresholds::load::gate_command(&ctx.chosen.profile, &load),
        row.question()
    ));
}

/// A path relative to the repository root as a markdown link from the record's directory
/// (`[runs/a](../../runs/a)`); an absolute path (outside the repository) in code.
fn repo_link(path: &str, record_dir: &str) -> String {
    if path.starts_with('/') || path.contains(':') {
        return code(path);
    }
    let up = record_dir.split('/').filter(|s| !s.is_empty() && *s != ".").count();
    format!("[{path}]({}{path})", "../".repeat(up))
}

/// The command that made a run, and which of its runs it is: `` `cargo xtask bench ...` `` or
/// `` `cargo xtask bench --sweep ...`, its run `concurrency 32` ``; `—` when not recorded.
fn command_cell(r: &Summary) -> String {
    match &r.invocation {
        Some(inv) => match &inv.part {
            Some(part) => format!("{}, its run {}", code(&inv.command), code(part)),
            None => code(&inv.command),
        },
        None => BLANK.to_string(),
    }
}

/// Reproduction: what each run was measured with, the command that made it, where its run
/// directory and charts are, and the notes the runs recorded.
fn reproduction_section(o: &mut Body, ctx: &Runs<'_>) {
    let (runs, input) = (&ctx.all, ctx.input);
    let dirs = input.run_dirs.len() == runs.len();
    let head = ["Config", "Run id"].into_iter().chain(dirs.then_some("Run directory")).chain([
        "Profile",
        "Status",
        "Simulated",
        "Git commit",
        "Tool",
        "Environment",
        "Engine config",
    ]);
    let mut table = Table::new(head.map(|h| (h, LEFT)));
    for (i, r) in runs.iter().enumerate() {
        let git = r.git.as_ref().map_or(BLANK.to_string(), |g| {
            format!("{}{}", code(&g.commit), if g.dirty { " (dirty)" } else { "" })
        });
        let env = &r.environment;
        let env_text = format!(
            "{} ({} {}, {} CPUs{})",
            code(&r.environment_fingerprint),
            env.os,
            env.arch,
            env.cpus,
            // A `|` in a CPU's name would end the table cell.
            env.cpu_model
                .as_ref()
                .map(|m| format!(", {}", m.replace('|', "\\|")))
                .unwrap_or_default()
        );
        let status = match r.status {
            infergate_model::summary::RunStatus::Complete => "complete",
            infergate_model::summary::RunStatus::Interrupted => "interrupted",
            infergate_model::summary::RunStatus::Failed => "failed",
            infergate_model::summary::RunStatus::Aborted => "aborted",
            infergate_model::summary::RunStatus::Oversaturated => "oversaturated",
        };
        let dir = dirs.then(|| repo_link(&input.run_dirs[i], input.record_dir));
        let engine = r.engine.as_ref().map_or(BLANK.to_string(), |e| match &e.derived_from {
            Some(from) => format!("{} (generated from {})", code(&e.file), code(from)),
            None => code(&e.file),
        });
        let mut cells = vec![ctx.labels[i].clone(), code(&r.run_id)];
        cells.extend(dir);
        cells.extend([
            code(&r.profile),
            status.to_string(),
            if r.simulated { "yes" } else { "no" }.to_string(),
            git,
            format!("{} {}", r.tool.name, r.tool.version),
            env_text,
            engine,
        ]);
        table.row(cells);
    }
    o.table(table);
    if runs.iter().any(|r| r.invocation.is_some()) {
        o.push_str(
            "\nThe command that made each run (run it from the repository root to measure it \
             again; `—`: the run did not record it):\n\n",
        );
        for (i, r) in runs.iter().enumerate() {
            o.line(format_args!("- {}: {}", ctx.labels[i], command_cell(r)));
        }
    } else {
        o.push_str("\nNo run recorded the command that made it.\n");
    }
    let how = if runs.iter().all(|r| r.profile == input.baseline.profile) {
        format!("with bench profile {}", code(&input.baseline.profile))
    } else {
        "with the bench profile of its row".to_string()
    };
    o.line(format_args!(
        "\nEach run was measured {how} by `cargo xtask bench`; its run directory holds \
         summary.json (every number above) and requests.jsonl."
    ));
    if ctx.has_capacity() {
        o.line(format_args!("{}", cap::REPRODUCTION));
    }
    if !input.charts.is_empty() {
        let list: Vec<String> =
            input.charts.iter().map(|c| repo_link(c, input.record_dir)).collect();
        o.line(format_args!("Charts the runs wrote: {}.", list.join(", ")));
    }
    if !input.assets.is_empty() {
        o.push_str(
            "\nCharts of this record (drawn from the runs by `adr new`, committed with it):\n\n",
        );
        for (target, caption) in input.assets {
            o.line(format_args!("![{caption}]({target})\n"));
        }
    }
    if dirs {
        o.push_str(
            "Run directories are relative to the repository root; they are not committed (`runs/` \
             is ignored by git), so keep them where reviewers can read them.\n",
        );
    }
    served_configuration(o, ctx);
    refreshed_datasets(o, input);
    let notes: Vec<String> = runs
        .iter()
        .enumerate()
        .flat_map(|(i, r)| r.notes.iter().map(move |n| format!("- {}: {n}", ctx.labels[i])))
        .collect();
    if !notes.is_empty() {
        o.push_str("\nNotes recorded by the runs:\n\n");
        for n in notes {
            o.line(format_args!("{n}"));
        }
    }
    o.push('\n');
}

/// What each run's server said it runs (`summary.engine.served`): the engine config keys
/// with their values and the requests they were read from (the engine's own keys, such as
/// `vllm.num_gpu_blocks`, stay in the summary); runs whose server revealed nothing say so.
fn served_configuration(o: &mut Body, ctx: &Runs<'_>) {
    let engines: Vec<_> = ctx.all.iter().map(|r| r.engine.as_ref()).collect();
    if engines.iter().all(|e| e.is_none_or(|e| e.served.is_empty())) {
        return;
    }
    o.push_str(
        "\nWhat each run's server said it runs (read from the engine before and after the \
         load):\n\n",
    );
    for (i, e) in engines.iter().enumerate() {
        let label = &ctx.labels[i];
        let Some(e) = e.filter(|e| !e.served.is_empty()) else {
            o.line(format_args!("- {label}: not revealed"));
            continue;
        };
        let shown: Vec<_> =
            e.served.iter().filter(|v| v.key.is_served_key() && v.key != "engine.model").collect();
        let mut from: Vec<String> = shown
            .iter()
            .map(|v| v.source.split(' ').take(2).collect::<Vec<_>>().join(" "))
            .collect();
        from.dedup();
        let by = e.served_by.as_deref().map_or(String::new(), |b| format!("{b}, "));
        let values: Vec<String> = shown
            .iter()
            .map(|v| code(&format!("{} = {}", v.key, infergate_model::served::show(&v.value))))
            .collect();
        o.line(format_args!("- {label} ({by}{}): {}", from.join(", "), values.join(", ")));
        for m in &e.mismatches {
            o.line(format_args!("  - differs from the file: {}", m.text(&e.file)));
        }
    }
}

/// The runs' datasets refreshed from production: what was replaced, from which log, window
/// and seed, and the provenance; a dataset edited since its refresh says so.
fn refreshed_datasets(o: &mut Body, input: &NewAdr<'_>) {
    if input.refreshed.is_empty() {
        return;
    }
    o.push_str(
        "\nDatasets refreshed from production requests (`cargo xtask dataset refresh`):\n\n",
    );
    for d in input.refreshed {
        let p = &d.provenance;
        o.line(format_args!(
            "- {}: {}; provenance {}.{}",
            code(&d.file),
            p.summary_line(),
            repo_link(&d.provenance_file, input.record_dir),
            if d.run_hash == p.dataset.output_hash {
                String::new()
            } else {
                format!(
                    " The runs' dataset ({}) is not the one the refresh wrote ({}): it was \
                     edited since.",
                    code(&d.run_hash),
                    code(&p.dataset.output_hash)
                )
            }
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_matrix_metric_is_in_the_registry() {
        // `propose` reads an unknown metric as not measured: the matrix must name known ones.
        for (header, metric, _) in all_columns() {
            assert!(MetricPath::parse(metric).is_ok(), "{header}: {metric}");
        }
    }

    #[test]
    fn titles_are_one_line_and_read_back_as_written() {
        assert!(parse_one_line("Sneaky\n- Status: Accepted").unwrap_err().contains("\\n"));
        assert!(parse_one_line("a\rb").is_err());
        assert!(parse_one_line("tab\there").is_err());
        assert_eq!(parse_one_line("Raise max_num_seqs").unwrap(), "Raise max_num_seqs");
        for t in [
            "../../x",
            "\\..",
            "Enable chunked prefill (8k batches)!",
            "Raise max_num_seqs to 512",
            "*not* emphasis, `not code`, [not](a link) <b>not html</b> &amp; x \\*",
            "Issue #42 ##",
            "- a list? 1. no",
        ] {
            let md = markdown_text(t);
            assert_eq!(heading_text(&md), t, "{t} written as {md}");
        }
        // Plain titles stay plain.
        assert_eq!(markdown_text("Raise max_num_seqs to 512"), "Raise max_num_seqs to 512");
    }

    #[test]
    fn slugs() {
        assert_eq!(
            slug("Enable chunked prefill (8k batches)!").unwrap(),
            "enable-chunked-prefill-8k-batches"
        );
        assert!(slug("¿?").is_err());
        assert!(slug(&"word ".repeat(40)).unwrap().len() <= 60);
    }

    #[test]
    fn measured_values_keep_four_significant_digits() {
        assert_eq!(sig_text(182.3456), "182.3");
        assert_eq!(sig_text(0.034215), "0.03422");
        assert_eq!(sig_text(12345.6), "12346");
        assert_eq!(sig_text(1.0), "1");
        assert_eq!(sig_text(0.0), "0");
    }

    #[test]
    fn json_params_flatten_and_convert() {
        let p = serde_json::json!({"engine": {"dtype": "float16", "tp": 4, "mem": 0.92}, "scheduler": {"lens": [1, 2], "x": null}});
        let flat = flatten_params(&p);
        assert_eq!(
            flat.keys().collect::<Vec<_>>(),
            vec!["engine.dtype", "engine.mem", "engine.tp", "scheduler.lens", "scheduler.x"]
        );
        assert_eq!(json_to_toml(&flat["engine.tp"]), Some(toml::Value::Integer(4)));
        assert_eq!(json_to_toml(&flat["engine.mem"]), Some(toml::Value::Float(0.92)));
        assert_eq!(json_to_toml(&flat["scheduler.x"]), None);
        assert_eq!(toml_text(&flat["scheduler.lens"]), "[1, 2]");
    }
}
