//! `cargo xtask adr ...`: architecture decision records that govern inference parameters.
//!
//! The format, the comparators, units, metric names and exit codes are documented in
//! `docs/adr/README.md`. This module is the command (`AdrCmd`); the pieces it puts together,
//! all but the last two pure functions of `infergate_policy::adr`:
//!
//! - [`parse`]: markdown -> [`Adr`] (never fails; problems are in `Adr::problems`);
//! - [`model`]: the typed record;
//! - [`records`]: the records directory, reading and writing records, a record's decision lines;
//! - [`lint`]: the lint rules; [`edit`]: status, date and link edits; [`new`]: a record from runs;
//!   [`capacity`]: what a record says of configurations measured by capacity searches;
//! - [`live`]: the live records' thresholds (gate.toml, whose format is [`crate::thresholds`]'s);
//! - [`alerts`]: the live records' rollback conditions as Prometheus alerting rules;
//! - [`check`] (`crate::adr_check`, shared with the MCP server's `adr_check` tool): `adr check`
//!   for pull requests; [`assets`]: the charts `adr new` writes beside a
//!   record.
//!
//! Arrows run one way: submodules import each other and lower modules (`crate::thresholds`,
//! `crate::text`, `crate::exit`, `crate::settings`), never this module. Policy is pure (text in,
//! typed values out); reading and writing files happens only in the command functions below and
//! in [`records`].

pub mod assets;
pub mod history;

pub use crate::adr_check as check;

pub use infergate_policy::adr::{
    alerts, budgets, capacity, draft, edit, lint, list, live, model, new, parse, records,
};

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::text::tool;
use clap::{Args, Subcommand};
use infergate_model::config::ConfigKey;
use infergate_model::trials::TrialSet;
use xshell::Shell;

pub use infergate_policy::adr::model::{
    Adr, AdrStatus, Decided, DecisionLine, Link, LinkKind, Located, Problem, Section, SectionKind,
    ThresholdRow,
};
pub use infergate_policy::adr::parse::parse_adr;
pub use infergate_policy::adr::records::{
    ADR_DIR, DecisionSet, decision_lines, is_record_file, load_records, next_number, read_records,
};

use crate::exit::Status;
use crate::text::{join_clean, line_diff, plural};
use crate::thresholds::file::{GATE_FILE, render_file};
use crate::thresholds::propose::parse_headroom;
use records::write_file;

fn today() -> String {
    chrono::Local::now().date_naive().format("%Y-%m-%d").to_string()
}

/// `cargo xtask adr`: decision records.
#[derive(Debug, Args)]
pub struct AdrCmd {
    /// Directory of the records, relative to the repository root.
    #[arg(long, global = true, default_value = ADR_DIR, value_name = "DIR")]
    pub dir: PathBuf,
    #[command(subcommand)]
    pub command: AdrSub,
}

#[derive(Debug, Subcommand)]
pub enum AdrSub {
    /// Write the next record from measured runs (status Proposed).
    New(NewArgs),
    /// List the records (number, title, status, date, thresholds, live, supersedes).
    List {
        /// Instead of the records: the governed values that no live record names with that
        /// value (what `ADR-Exempt` commits left without a record).
        #[arg(long)]
        exempt: bool,
        /// Also write the list as JSON to FILE (`-`: to standard output, instead of the
        /// table).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
    /// Mark a Proposed record Accepted (refused while `adr lint` finds problems in it).
    Accept {
        /// Record number.
        number: u32,
    },
    /// Mark OLD `Superseded by NEW` and list `Supersedes OLD` in NEW's Links; with `--part`,
    /// supersede only those thresholds and keys of OLD (`Supersedes in part OLD: ...` in NEW's
    /// Links; OLD stays live for the rest).
    Supersede {
        old: u32,
        new: u32,
        /// A metric of OLD's thresholds (`metrics.ttft_ms.p99`) or a key of its decision lines
        /// (`configs/engine.toml: scheduler.max_num_seqs`) that NEW takes over; repeatable.
        #[arg(long = "part", value_name = "METRIC|FILE: KEY")]
        parts: Vec<String>,
    },
    /// Check every record against the format rules (exit 1 on problems).
    Lint,
    /// Fail when a governed parameter changed since the merge base without a new record naming
    /// it (exit 1), for pull requests; see docs/adr/README.md.
    Check(check::CheckArgs),
    /// The timeline of a governed key's values in git history: each change, the record that
    /// names the value, its status and date, and the commit.
    History {
        /// The key, dotted as in decision lines (`scheduler.max_num_seqs`).
        key: ConfigKey,
        /// Only this governed file (`configs/engine.toml`); all governed files otherwise.
        #[arg(long, value_name = "FILE")]
        file: Option<String>,
        /// The commit whose history is read.
        #[arg(long, value_name = "REV", default_value = "HEAD")]
        head: String,
    },
    /// Write thresholds/gate.toml from the live records.
    Thresholds {
        /// Do not write: exit 1 when the file is out of date.
        #[arg(long)]
        check: bool,
        /// Output file, relative to the repository root.
        #[arg(long, default_value = GATE_FILE, value_name = "FILE")]
        out: PathBuf,
    },
    /// Write the live records' rollback conditions as Prometheus alerting rules and as a
    /// Kubernetes PrometheusRule.
    Alerts {
        /// Do not write: exit 1 when either file is out of date.
        #[arg(long)]
        check: bool,
        /// The Prometheus rules file, relative to the repository root.
        #[arg(long, default_value = alerts::RULES_FILE, value_name = "FILE")]
        rules: PathBuf,
        /// The PrometheusRule manifest, relative to the repository root.
        #[arg(long, default_value = alerts::K8S_FILE, value_name = "FILE")]
        k8s: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// Title of the decision: one line (a line break or other control character is refused).
    #[arg(value_parser = new::parse_one_line)]
    pub title: String,
    /// Baseline run: a bench run directory or its summary.json; a trial set's directory (its
    /// trials, as estimates with intervals); a sweep directory (its knee stage), an acceptance
    /// directory (its baseline run), a strategy comparison's directory (its first strategy's
    /// run) or a capacity search's directory (`bench --capacity`: its bracket, and its probe at
    /// the bracket's lower end).
    #[arg(long, value_name = "RUN", required_unless_present = "tune")]
    pub baseline: Option<PathBuf>,
    /// Experiment runs, in order (`--choose 1`, 2, ...); a sweep directory stands for its knee
    /// stage, an acceptance directory for its candidate run, a strategy comparison's directory
    /// for each strategy's run but the baseline's, a capacity search's directory for its
    /// bracket.
    #[arg(long = "exp", value_name = "RUN")]
    pub experiments: Vec<PathBuf>,
    /// A tune directory (`cargo xtask tune`): every measured configuration a row (the one
    /// that runs the governed file's values, else the first, as the baseline), the winner
    /// chosen, the configurations that failed listed as not measured.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["baseline", "experiments", "choose"])]
    pub tune: Option<PathBuf>,
    /// The experiment this record adopts (1..=n; 0 keeps the baseline). Needed with several.
    #[arg(long, value_name = "N")]
    pub choose: Option<usize>,
    /// Headroom of the proposed thresholds: `10%` or a fraction.
    #[arg(long, default_value = "10%", value_parser = parse_headroom)]
    pub headroom: f64,
    /// Who decides (written into the record; a placeholder to fill otherwise); one line.
    #[arg(long, value_parser = new::parse_one_line)]
    pub deciders: Option<String>,
    /// Coverage of the estimates' intervals, within (0, 1).
    #[arg(long, value_name = "P", default_value_t = infergate_model::stats::DEFAULT_CONFIDENCE, value_parser = infergate_model::stats::parse_confidence)]
    pub confidence: f64,
}

impl AdrCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let dir = self.dir;
        match self.command {
            AdrSub::New(args) => run_new(&root, &dir, args),
            AdrSub::List { exempt, json } => run_list(&root, &dir, exempt, json),
            AdrSub::Accept { number } => run_accept(&root, &dir, number),
            AdrSub::Supersede { old, new, parts } if !parts.is_empty() => {
                run_supersede_in_part(&root, &dir, old, new, &parts)
            }
            AdrSub::Supersede { old, new, .. } => run_supersede(&root, &dir, old, new),
            AdrSub::Lint => run_lint(&root, &dir),
            AdrSub::Check(args) => check::run(&root, &dir, args),
            AdrSub::History { key, file, head } => {
                let dir = dir.to_string_lossy().replace('\\', "/");
                let entries = history::timeline(&root, &dir, &key, file.as_deref(), &head)?;
                print!("{}", history::render(&key, &entries));
                Ok(Status::Success)
            }
            AdrSub::Thresholds { check, out } => run_thresholds(&root, &dir, &out, check),
            AdrSub::Alerts { check, rules, k8s } => run_alerts(&root, &dir, &[rules, k8s], check),
        }
    }
}

fn print_problems(problems: &[Problem]) {
    for p in problems {
        println!("{p}");
    }
}

/// What a tune directory stands for in `adr new`: the baseline's and the experiments' run
/// directories, the chosen row, each row's name (baseline first) and the lines about the
/// configurations considered (those not measured, the winner at the edge of the grid).
struct TuneInputs {
    baseline: PathBuf,
    experiments: Vec<PathBuf>,
    choose: usize,
    names: Vec<String>,
    considered: Vec<String>,
}

fn tune_inputs(root: &Path, tune_dir: &Path) -> anyhow::Result<TuneInputs> {
    use infergate_policy::tune::model::RowStatus;
    let full = join_clean(root, tune_dir);
    let tune = infergate_policy::tune::TuneFile::read(&full)?;
    let Some(winner) = tune.winner.clone() else {
        bail!(
            "the tune {} has no winner (no measured configuration meets every SLO of its \
             profile); write the record from runs with --baseline and --exp",
            tune_dir.display()
        );
    };
    let governed: Option<toml::Table> = std::fs::read_to_string(root.join(&tune.engine_config))
        .ok()
        .and_then(|t| toml::from_str(&t).ok());
    let is_governed = |r: &infergate_policy::tune::TuneRow| {
        governed.as_ref().is_some_and(|g| {
            r.settings.iter().all(|(k, v)| {
                k.get_in(g).and_then(|a| serde_json::to_value(a).ok()).as_ref() == Some(v)
            })
        })
    };
    // Successive halving's eliminated rows ran fewer requests: not this record's scenario.
    let mut measured: Vec<&infergate_policy::tune::TuneRow> =
        tune.rows.iter().filter(|r| r.status == RowStatus::Measured && !r.eliminated).collect();
    if let Some(b) = measured.iter().position(|r| is_governed(r)) {
        let row = measured.remove(b);
        measured.insert(0, row);
    }
    // Whether measurements or the tie-break chose the winner, first under the matrix.
    let mut considered: Vec<String> =
        // `~` (a request-level interval) escaped: a pair of them would strike text through.
        tune.statement().map(|s| format!("Winner: {}.", s.replace('~', "\\~"))).into_iter().collect();
    considered.extend(tune.rows.iter().filter(|r| r.status == RowStatus::Failed).map(|r| {
        let why = r.error.as_deref().unwrap_or("failed").lines().next().unwrap_or_default();
        format!("Not measured: `{}`: {}.", r.name, why.trim_end_matches('.'))
    }));
    considered.extend(tune.rows.iter().filter(|r| r.eliminated).map(|r| {
        format!(
            "Eliminated by successive halving after rung {} ({} measured requests): `{}`.",
            r.rung.unwrap_or_default(),
            r.requests,
            r.name
        )
    }));
    considered.extend(tune.capacity_overlaps.iter().map(|(a, b)| {
        let bracket = |name: &str| {
            tune.rows
                .iter()
                .find(|r| r.name == name)
                .and_then(|r| r.capacity.as_ref())
                .map_or_else(String::new, |c| format!(" {}", c.text()))
        };
        format!(
            "Capacity brackets overlap: `{a}`{} and `{b}`{}: their capacities are not shown to \
             differ.",
            bracket(a),
            bracket(b)
        )
    }));
    considered.extend(tune.warnings.iter().map(|w| format!("Edge of the grid: {w}.")));
    let dirs: Vec<PathBuf> = measured.iter().map(|r| tune_dir.join(&r.dir)).collect();
    Ok(TuneInputs {
        baseline: dirs[0].clone(),
        experiments: dirs[1..].to_vec(),
        choose: measured.iter().position(|r| r.name == winner).unwrap_or(0),
        names: measured.iter().map(|r| r.name.clone()).collect(),
        considered,
    })
}

/// `--tune DIR` stands for `--baseline`, `--exp` and `--choose` ([`tune_inputs`]); returns
/// the tune's inputs and the baseline path.
fn resolve_tune(root: &Path, args: &mut NewArgs) -> anyhow::Result<(Option<TuneInputs>, PathBuf)> {
    let tune = match &args.tune {
        Some(t) => Some(tune_inputs(root, t)?),
        None => None,
    };
    if let Some(t) = &tune {
        args.baseline = Some(t.baseline.clone());
        args.experiments = t.experiments.clone();
        args.choose = Some(t.choose);
    }
    let Some(baseline) = args.baseline.clone() else {
        bail!("pass --baseline RUN (or --tune DIR)");
    };
    Ok((tune, baseline))
}

/// A tune's rows are named by the keys their configurations set (the part of the command
/// their runs are).
fn name_tune_rows(
    tune: Option<&TuneInputs>,
    baseline: &mut infergate_model::Summary,
    experiments: &mut [infergate_model::Summary],
) {
    let Some(tune) = tune else { return };
    let rows = std::iter::once(baseline).chain(experiments.iter_mut());
    for (s, name) in rows.zip(&tune.names) {
        let command =
            s.invocation.as_ref().map_or("cargo xtask tune".into(), |i| i.command.clone());
        s.invocation =
            Some(infergate_model::summary::Invocation { command, part: Some(name.clone()) });
    }
}

fn run_new(root: &Path, dir: &Path, mut args: NewArgs) -> anyhow::Result<Status> {
    let (tune, baseline_path) = resolve_tune(root, &mut args)?;
    // A sweep or an acceptance directory stands for one of its runs (new::resolve_run_dir).
    // Each run as the record names it: the resolved run directory (a sweep's stage, an
    // acceptance's side) relative to the root when it is under it.
    let shown = |d: &Path| shown_path(root, d);
    // A comparison directory stands for several runs (new::resolve_run_dirs): its first
    // strategy as the baseline, its strategies but the baseline's as experiments.
    let mut run_dirs: Vec<String> = Vec::new();
    let mut resolve = |p: &Path, baseline: bool| resolve_rows(root, p, baseline, &mut run_dirs);
    let (mut baseline, baseline_set, baseline_capacity) = resolve(&baseline_path, true)?.remove(0);
    let mut experiments = Vec::new();
    let mut sets = vec![baseline_set];
    let mut capacities = vec![baseline_capacity];
    for p in &args.experiments {
        for (summary, set, capacity) in resolve(p, false)? {
            experiments.push(summary);
            sets.push(set);
            capacities.push(capacity);
        }
    }
    if capacities.iter().all(Option::is_none) {
        capacities.clear();
    }
    name_tune_rows(tune.as_ref(), &mut baseline, &mut experiments);
    let stats = new::row_stats(&sets, args.confidence);
    // Charts the runs wrote beside them (a sweep's sweep.svg, a capacity search's
    // capacity.svg).
    let mut charts: Vec<String> = Vec::new();
    for p in std::iter::once(&baseline_path).chain(args.experiments.iter()) {
        for name in ["sweep.svg", "capacity.svg"] {
            let svg = join_clean(root, p).join(name);
            if svg.is_file() && !charts.contains(&shown(&svg)) {
                charts.push(shown(&svg));
            }
        }
    }
    let choose = chosen_row(args.choose, &baseline, &experiments)?;
    measured_environment(&run_dirs, &sets, choose)?;
    new::served_check(&baseline, &experiments, choose)?;
    let NextRecord { mut files, number, path } = next_record(root, dir, &new::slug(&args.title)?)?;
    let full = root.join(&path);
    // The record's charts, written beside it before it links them.
    let all: Vec<&infergate_model::Summary> =
        std::iter::once(&baseline).chain(experiments.iter()).collect();
    let inputs: Vec<&PathBuf> =
        std::iter::once(&baseline_path).chain(args.experiments.iter()).collect();
    let drawn =
        write_assets(root, dir, number, &new::row_labels(&all), &run_dirs, choose, &inputs)?;
    let linked: Vec<(String, String)> = drawn
        .iter()
        .map(|a| (format!("{}{}", model::ASSETS_DIR, a.file), a.caption.clone()))
        .collect();
    let input = new::NewAdr {
        number,
        title: &args.title,
        date: chrono::Local::now().date_naive(),
        deciders: args.deciders.as_deref(),
        headroom: args.headroom,
        baseline: &baseline,
        experiments: &experiments,
        choose,
        run_dirs: &run_dirs,
        charts: &charts,
        assets: &linked,
        record_dir: &shown(dir),
        stats: &stats,
        considered: tune.as_ref().map_or(&[][..], |t| t.considered.as_slice()),
        refreshed: &refreshed_datasets(root, &all)?,
        sources: &declared_sources(root)?,
        capacities: &capacities,
    };
    let text = new::render(&input)?;
    write_file(&full, &text)?;
    println!("wrote {} (ADR-{number:04}, Proposed)", path.display());
    for a in &drawn {
        println!(
            "wrote {} (linked from the record)",
            dir.join(model::ASSETS_DIR).join(&a.file).display()
        );
    }
    files.push((path.clone(), text));
    print_new_problems(root, &path, number, &files);
    Ok(Status::Success)
}

/// One configuration of `adr new`: its summary, its trials and, when a capacity search
/// measured it, the search.
type Row = (infergate_model::Summary, TrialSet, Option<capacity::CapacityRow>);

/// A path as a record names it: relative to the root when it is under it, `/`-separated.
fn shown_path(root: &Path, d: &Path) -> String {
    let rel = d.strip_prefix(root).unwrap_or(d);
    rel.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect::<PathBuf>()
        .to_string_lossy()
        .replace('\\', "/")
}

/// The rows a path given to `adr new` stands for, each run directory added to `run_dirs` as the
/// record names it. A run or a trial set is one row (a trial set's first trial stands for its
/// scenario and parameters); a sweep or an acceptance directory stands for one of its runs
/// (`new::resolve_run_dir`: the resolved run directory, a sweep's stage, an acceptance's side),
/// a comparison directory for several (`new::resolve_run_dirs`); a capacity search's directory
/// is one row with the search (its probe at the bracket's lower end stands for it in the other
/// columns).
fn resolve_rows(
    root: &Path,
    p: &Path,
    baseline: bool,
    run_dirs: &mut Vec<String>,
) -> anyhow::Result<Vec<Row>> {
    let full = join_clean(root, p);
    if infergate_model::capacity::is_capacity_dir(&full) {
        let dir = if full.is_dir() { full } else { full.parent().unwrap_or(root).to_path_buf() };
        let (row, set) = capacity_row(&dir, shown_path(root, &dir))
            .with_context(|| format!("cannot use the capacity search {}", p.display()))?;
        run_dirs.push(row.dir.clone());
        let mut summary = set.trials[0].summary.clone();
        // A search is one row: neither its trial nor its probe's load names it.
        if let Some(inv) = summary.invocation.as_mut() {
            inv.part = None;
        }
        summary.extra.sweep = None;
        return Ok(vec![(summary, set, Some(row))]);
    }
    let dirs = new::resolve_run_dirs(&full, baseline)
        .map_err(anyhow::Error::new)
        .with_context(|| format!("cannot use run {}", p.display()))?;
    let mut out = Vec::new();
    for d in dirs {
        let name = shown_path(root, &d);
        if !baseline && run_dirs.first() == Some(&name) {
            continue;
        }
        let set = TrialSet::load(&d)
            .map_err(anyhow::Error::new)
            .with_context(|| format!("cannot use run {}", p.display()))?;
        run_dirs.push(name.clone());
        let mut summary = set.trials[0].summary.clone();
        // A trial set is one row: its first trial stands for it, not as "trial 1".
        if set.index.is_some()
            && let Some(inv) = summary.invocation.as_mut()
        {
            inv.part = None;
        }
        out.push((summary, set, None));
    }
    Ok(out)
}

/// A capacity search's directory as a configuration: the search, and the trials of its probe at
/// the bracket's lower end (else its lowest probe) as the row's trial set.
fn capacity_row(dir: &Path, shown: String) -> anyhow::Result<(capacity::CapacityRow, TrialSet)> {
    use infergate_model::trials::Trial;
    let file = infergate_model::capacity::CapacityFile::read(dir)?;
    let row = capacity::CapacityRow { file, dir: shown };
    let Some(probe) = row.probe() else {
        bail!("it measured no probe, so it has no capacity to record");
    };
    let mut trials = Vec::new();
    for rel in probe.trials.iter().filter_map(|t| t.dir.as_deref()) {
        let d = dir.join(rel);
        let summary = infergate_model::Summary::read(&d)
            .with_context(|| format!("cannot read the trial {rel} of its probe"))?;
        trials.push(Trial { dir: d, summary });
    }
    let Some(first) = trials.first() else {
        bail!("its probe at {} names no trial directory", probe.load);
    };
    let set_dir = first.dir.parent().unwrap_or(dir).to_path_buf();
    Ok((row, TrialSet { dir: set_dir, trials, index: None, problems: Vec::new() }))
}

/// The next record of a directory: the records already there (path and text), and the number
/// and path (`NNNN-slug.md`) of the next one.
struct NextRecord {
    files: Vec<(PathBuf, String)>,
    number: u32,
    path: PathBuf,
}

fn next_record(root: &Path, dir: &Path, slug: &str) -> anyhow::Result<NextRecord> {
    let files = if root.join(dir).exists() { read_records(root, dir)? } else { Vec::new() };
    let paths: Vec<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
    let number = next_number(&paths);
    if number > 9999 {
        bail!(
            "record numbers have four digits (`NNNN-slug.md`) and {} already holds 9999; there \
             is no next number",
            dir.display()
        );
    }
    let path = dir.join(format!("{number:04}-{slug}.md"));
    if root.join(&path).exists() {
        bail!("{} already exists", path.display());
    }
    Ok(NextRecord { files, number, path })
}

/// The runs' workload files that have a provenance file beside them (`dataset refresh`), each
/// once; an unreadable provenance is an error naming it.
fn refreshed_datasets(
    root: &Path,
    runs: &[&infergate_model::Summary],
) -> anyhow::Result<Vec<new::RefreshedDataset>> {
    use infergate_model::refresh::provenance::{self, provenance_name};
    let mut out: Vec<new::RefreshedDataset> = Vec::new();
    for f in runs.iter().flat_map(|r| &r.workload.files) {
        let name = provenance_name(&f.path);
        let path = join_clean(root, Path::new(&name));
        if out.iter().any(|d| d.file == f.path) || !path.is_file() {
            continue;
        }
        let provenance = provenance::read(&path)
            .with_context(|| format!("cannot cite the provenance of {}", f.path))?;
        out.push(new::RefreshedDataset {
            file: f.path.clone(),
            run_hash: f.hash.clone(),
            provenance_file: name,
            provenance,
        });
    }
    Ok(out)
}

/// The row a record adopts: `--choose` as given, else the only experiment (or the baseline
/// when there is none); with several experiments `--choose` is required.
fn chosen_row(
    choose: Option<usize>,
    baseline: &infergate_model::Summary,
    experiments: &[infergate_model::Summary],
) -> anyhow::Result<usize> {
    Ok(match (choose, experiments.len()) {
        (Some(c), _) => c,
        (None, 0) => 0,
        (None, 1) => 1,
        (None, n) => {
            let all: Vec<&infergate_model::Summary> =
                std::iter::once(baseline).chain(experiments.iter()).collect();
            let labels = new::row_labels(&all);
            let listed: Vec<String> =
                labels.iter().enumerate().skip(1).map(|(i, l)| format!("{i} = {l}")).collect();
            bail!(
                "{n} experiments ({}): pass --choose N (1..={n}) to name the one this record \
                 adopts, or --choose 0 to keep the baseline ({})",
                listed.join(", "),
                labels[0]
            )
        }
    })
}

/// The environment the proposed thresholds are keyed to: the one every run of the chosen row
/// measured (a trial set's trials, a sweep's knee). Trials of the chosen row measured on
/// different environments are refused, each named with its environment: no one key holds for
/// their values. Another row measured elsewhere is a warning naming both environments (a row
/// that changes the model, dtype or quantization can be the decision itself).
fn measured_environment(
    run_dirs: &[String],
    sets: &[TrialSet],
    choose: usize,
) -> anyhow::Result<Option<infergate_model::envkey::EnvironmentKey>> {
    use infergate_model::envkey::EnvironmentKey;
    let Some(chosen) = sets.get(choose) else { return Ok(None) };
    let keys: Vec<(String, EnvironmentKey)> = chosen
        .trials
        .iter()
        .map(|t| (t.dir.display().to_string(), EnvironmentKey::of(&t.summary)))
        .collect();
    let Some((_, key)) = keys.first() else { return Ok(None) };
    if keys.iter().any(|(_, k)| k != key) {
        let listed: Vec<String> = keys.iter().map(|(d, k)| format!("  {d}: {k}")).collect();
        bail!(
            "the runs of the chosen row ({}) were measured on different environments, and the \
             thresholds a record proposes hold for one (GPU model and count, engine, model, \
             dtype):\n{}\nmeasure them on one environment",
            run_dirs.get(choose).map_or("?", String::as_str),
            listed.join("\n")
        );
    }
    for (i, set) in sets.iter().enumerate().filter(|(i, _)| *i != choose) {
        let Some(first) = set.trials.first() else { continue };
        let other = EnvironmentKey::of(&first.summary);
        if other != *key {
            eprintln!(
                "warning: {} was measured on `{other}`, the chosen row {} on `{key}`: the \
                 proposed thresholds are keyed to the chosen row's environment only",
                run_dirs.get(i).map_or("a run", String::as_str),
                run_dirs.get(choose).map_or("", String::as_str),
            );
        }
    }
    Ok(Some(key.clone()))
}

/// After `adr new`: the live records whose scope the new one shares, and what lint still finds
/// in it (the placeholders a person fills in).
fn print_new_problems(root: &Path, path: &Path, number: u32, files: &[(PathBuf, String)]) {
    let adrs: Vec<Adr> = files.iter().map(|(p, t)| parse_adr(p, t)).collect();
    if let Some(me) = adrs.last() {
        for w in live::live_in_scope_of(me, &adrs) {
            println!("{w}");
        }
    }
    let left: Vec<Problem> =
        lint::lint_in_repo(root, &adrs).into_iter().filter(|p| p.path == path).collect();
    if !left.is_empty() {
        println!("fill in before `{} adr accept {number}`:", tool());
        print_problems(&left);
    }
}

/// Draw the charts of record `number` and write them into the assets directory beside the
/// records: the latency CDFs of the baseline and the chosen run (every run when the baseline is
/// kept), each sweep among `inputs`, and the Pareto chart of the tune the runs belong to.
/// Returns what it wrote.
fn write_assets(
    root: &Path,
    dir: &Path,
    number: u32,
    labels: &[String],
    run_dirs: &[String],
    choose: usize,
    inputs: &[&PathBuf],
) -> anyhow::Result<Vec<assets::Asset>> {
    let chart_runs: Vec<usize> =
        if choose > 0 { vec![0, choose] } else { (0..run_dirs.len()).collect() };
    let run_paths: Vec<PathBuf> = run_dirs.iter().map(|d| join_clean(root, Path::new(d))).collect();
    let refs: Vec<assets::RunRef<'_>> = chart_runs
        .iter()
        .filter(|&&i| i < run_paths.len() && i < labels.len())
        .map(|&i| assets::RunRef { label: &labels[i], dir: &run_paths[i] })
        .collect();
    let mut sweeps = Vec::new();
    for p in inputs {
        let d = join_clean(root, p);
        if d.join(infergate_model::sweep::SWEEP_FILE).is_file() {
            sweeps.push(infergate_model::sweep::SweepSummary::read(&d)?);
        }
    }
    let mut drawn = assets::render(number, &refs, &sweeps);
    // Runs of a tune (their directories inside the tune's): its Pareto chart.
    let tune = inputs.first().and_then(|p| {
        infergate_policy::tune::TuneFile::read(
            join_clean(root, p).parent()?.join(infergate_policy::tune::TUNE_FILE).as_path(),
        )
        .ok()
    });
    if let Some(tune) = tune {
        drawn.push(assets::Asset {
            file: format!("{number:04}-pareto.svg"),
            caption: "Throughput and goodput against TTFT P99: every configuration of the tune, \
                      the Pareto fronts and the winner"
                .into(),
            svg: crate::chart::figures::pareto_svg(&tune.pareto_points()),
        });
    }
    let assets_dir = root.join(dir).join(model::ASSETS_DIR);
    for a in &drawn {
        std::fs::create_dir_all(&assets_dir)
            .with_context(|| format!("cannot create {}", assets_dir.display()))?;
        write_file(&assets_dir.join(&a.file), &a.svg)?;
    }
    Ok(drawn)
}

fn run_list(
    root: &Path,
    dir: &Path,
    exempt: bool,
    json: Option<PathBuf>,
) -> anyhow::Result<Status> {
    let adrs = load_records(root, dir)?;
    if exempt {
        let governed = governed_files(root)?.all();
        let unnamed = list::unnamed_values(&governed, &adrs);
        if let Some(file) = &json {
            let items: Vec<serde_json::Value> = unnamed
                .iter()
                .map(|u| {
                    serde_json::json!({
                        "file": u.file, "key": u.key, "value": check::semdiff::inline(&u.value),
                        "live_records": u.others,
                    })
                })
                .collect();
            crate::outpath::write_json(root, file, &items)?;
            if file == Path::new("-") {
                return Ok(Status::Success);
            }
        }
        let keys: usize = governed.iter().map(|(_, k)| k.len()).sum();
        if unnamed.is_empty() {
            println!("every governed value ({}) is named by a live record", plural(keys, "key"));
        } else {
            println!("{}", list::unnamed_table(&unnamed));
            println!(
                "{} of {} in {} not named by a live record with that value (changed under \
                 ADR-Exempt, or never recorded): write the records that name them",
                plural(unnamed.len(), "governed value"),
                plural(keys, "key"),
                plural(governed.len(), "governed file"),
            );
        }
        return Ok(Status::Success);
    }
    if let Some(file) = &json {
        crate::outpath::write_json(root, file, &list::list_json(&adrs))?;
    }
    if json.as_deref() != Some(Path::new("-")) {
        println!("{}", list_table(&adrs));
    }
    Ok(Status::Success)
}

/// The governed files of the work tree (the settings' patterns and every `engine_config` of the
/// bench configuration), each with its flattened keys, sorted by path.
/// The governed values of the work tree, by file: the governed TOML files (flattened) and the
/// declared sources (read into canonical keys).
struct GovernedValues {
    toml: Vec<(String, std::collections::BTreeMap<String, toml::Value>)>,
    sources: Vec<(String, std::collections::BTreeMap<String, toml::Value>)>,
}

impl GovernedValues {
    fn all(self) -> Vec<(String, std::collections::BTreeMap<String, toml::Value>)> {
        self.toml.into_iter().chain(self.sources).collect()
    }
}

fn governed_files(root: &Path) -> anyhow::Result<GovernedValues> {
    use crate::settings::{self, BENCH_FILE, SETTINGS_FILE, Settings};
    use infergate_model::config::Source;
    let read = |rel: &str| -> anyhow::Result<Option<String>> {
        match std::fs::read_to_string(root.join(rel)) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {rel}")),
        }
    };
    let settings = match read(SETTINGS_FILE)? {
        Some(t) => Settings::parse(&Source::new(SETTINGS_FILE, t))?,
        None => Settings::default(),
    };
    let mut patterns = settings.governed_patterns();
    if let Some(t) = read(BENCH_FILE)? {
        for r in settings::engine_config_refs(&Source::new(BENCH_FILE, t))? {
            if r.ungovernable().is_none() && !patterns.contains(&r.path) {
                patterns.push(r.path);
            }
        }
    }
    let mut paths = Vec::new();
    let mut stack = vec![root.join("configs")];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(root) {
                let rel = rel.to_string_lossy().replace('\\', "/");
                if settings::is_governed(&patterns, &rel) {
                    paths.push(rel);
                }
            }
        }
    }
    paths.sort();
    let toml = paths
        .into_iter()
        .map(|p| {
            let text = read(&p)?.unwrap_or_default();
            let table = check::semdiff::parse(&Source::new(&p, text))?;
            Ok((p, check::semdiff::flatten(&table)))
        })
        .collect::<anyhow::Result<_>>()?;
    // The declared sources among the repository's tracked files, read as `adr check` reads
    // them.
    let mut sources = Vec::new();
    if !settings.adr.sources.is_empty() {
        let repo = crate::git::open(root)?;
        let index = repo.index().context("cannot read the git index")?;
        let mut tracked: Vec<String> =
            index.iter().map(|e| String::from_utf8_lossy(&e.path).into_owned()).collect();
        tracked.sort();
        for path in tracked {
            if settings::is_governed(&patterns, &path) {
                continue;
            }
            let Some(decl) = settings.sources_of(&path).next() else { continue };
            let Some(text) = read(&path)? else { continue };
            let e = infergate_model::sources::extract(decl, &path, &text)
                .with_context(|| format!("cannot read the governed source {path}"))?;
            sources.push((path, e.params.into_iter().map(|p| (p.key, p.value)).collect()));
        }
    }
    Ok(GovernedValues { toml, sources })
}

/// The declared governed sources of the work tree (`[[adr.source]]`) with the canonical keys
/// each gives, for the decision lines of `adr new`.
fn declared_sources(root: &Path) -> anyhow::Result<Vec<(String, Vec<String>)>> {
    Ok(governed_files(root)?
        .sources
        .into_iter()
        .map(|(p, keys)| (p, keys.into_keys().filter(|k| !k.starts_with("unmapped.")).collect()))
        .collect())
}

pub use list::list_table;

fn find(adrs: &[Adr], n: u32, dir: &Path) -> anyhow::Result<usize> {
    adrs.iter()
        .position(|a| a.number == Some(n))
        .with_context(|| format!("no record {n:04} in {}", dir.display()))
}

fn run_accept(root: &Path, dir: &Path, number: u32) -> anyhow::Result<Status> {
    let mut files = read_records(root, dir)?;
    let adrs: Vec<Adr> = files.iter().map(|(p, t)| parse_adr(p, t)).collect();
    let i = find(&adrs, number, dir)?;
    let adr = &adrs[i];
    match adr.status_value() {
        Some(AdrStatus::Proposed) => {}
        Some(AdrStatus::Accepted) => {
            println!("{} is already Accepted", adr.label());
            return Ok(Status::Success);
        }
        Some(other) => bail!("{} is {other}; only a Proposed record can be accepted", adr.label()),
        None => {} // lint reports it below
    }
    let problems: Vec<Problem> =
        lint::lint_in_repo(root, &adrs).into_iter().filter(|p| p.path == adr.path).collect();
    if !problems.is_empty() {
        print_problems(&problems);
        println!("{} cannot be accepted until `adr lint` finds nothing in it", adr.label());
        return Ok(Status::PolicyViolated);
    }
    let text = edit::set_status_and_date(&files[i].1, adr, "Accepted", &today())?;
    let path = adr.path.clone();
    let label = adr.label();
    files[i].1 = text;
    let after: Vec<Adr> = files.iter().map(|(p, t)| parse_adr(p, t)).collect();
    // Conflicts that accepting this record would add (not those already there), in file order.
    let all_conflicts = |adrs: &[Adr]| {
        let mut c = live::conflicts(&live::live_thresholds(adrs));
        c.extend(live::decision_conflicts(adrs));
        c
    };
    let before = all_conflicts(&adrs);
    let mut clashes: Vec<Problem> =
        all_conflicts(&after).into_iter().filter(|p| !before.contains(p)).collect();
    clashes.sort();
    if !clashes.is_empty() {
        print_problems(&clashes);
        println!(
            "{label} cannot be accepted while another live record sets the same metric or \
             decides the same key otherwise: supersede it first (in whole or in part)"
        );
        return Ok(Status::PolicyViolated);
    }
    write_file(&root.join(&path), &files[i].1)?;
    println!("{label} accepted; run `{} adr thresholds` to update {GATE_FILE}", tool());
    Ok(Status::Success)
}

/// The records of the repository (files and parsed), and where OLD and NEW are among them.
type RecordPair = (Vec<(PathBuf, String)>, Vec<Adr>, usize, usize);

fn supersede_pair(root: &Path, dir: &Path, old: u32, new: u32) -> anyhow::Result<RecordPair> {
    if old == new {
        bail!("a record cannot supersede itself");
    }
    let files = read_records(root, dir)?;
    let adrs: Vec<Adr> = files.iter().map(|(p, t)| parse_adr(p, t)).collect();
    let (oi, ni) = (find(&adrs, old, dir)?, find(&adrs, new, dir)?);
    Ok((files, adrs, oi, ni))
}

fn run_supersede(root: &Path, dir: &Path, old: u32, new: u32) -> anyhow::Result<Status> {
    let (files, adrs, oi, ni) = supersede_pair(root, dir, old, new)?;
    let (o, n) = (&adrs[oi], &adrs[ni]);
    match o.status_value() {
        Some(AdrStatus::Accepted) => {}
        Some(AdrStatus::SupersededBy(x)) if x == new => {}
        other => bail!(
            "{} is {}; only an Accepted record can be superseded",
            o.label(),
            other.map_or("without a valid status".into(), |s| s.to_string())
        ),
    }
    match n.status_value() {
        Some(AdrStatus::Proposed | AdrStatus::Accepted) => {}
        other => bail!(
            "{} is {}; the superseding record must be Proposed or Accepted",
            n.label(),
            other.map_or("without a valid status".into(), |s| s.to_string())
        ),
    }
    let name =
        |a: &Adr| a.path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let mut old_text = edit::set_status_and_date(
        &files[oi].1,
        o,
        &AdrStatus::SupersededBy(new).to_string(),
        &today(),
    )?;
    if !o.links.iter().any(|l| l.kind == LinkKind::SupersededBy && l.number == new) {
        let reparsed = parse_adr(&o.path, &old_text);
        old_text = edit::add_link(
            &old_text,
            &reparsed,
            &format!("Superseded by [ADR-{new:04}]({})", name(n)),
        );
    }
    let mut new_text = files[ni].1.clone();
    if !n.links.iter().any(|l| l.kind == LinkKind::Supersedes && l.number == old) {
        new_text = edit::add_link(&new_text, n, &format!("Supersedes [ADR-{old:04}]({})", name(o)));
    }
    write_file(&root.join(&o.path), &old_text)?;
    write_file(&root.join(&n.path), &new_text)?;
    println!("{} is Superseded by {new:04}; {} lists Supersedes {old:04}", o.label(), n.label());
    if n.status_value() == Some(AdrStatus::Proposed) {
        println!(
            "accept {} (`{} adr accept {new}`) to put its thresholds in force",
            n.label(),
            tool()
        );
    }
    println!("run `{} adr thresholds` to update {GATE_FILE}", tool());
    Ok(Status::Success)
}

/// `adr supersede OLD NEW --part ...`: NEW's Links say `Supersedes in part OLD: ...`; OLD is
/// not edited. The parts are checked against OLD as lint checks them.
fn run_supersede_in_part(
    root: &Path,
    dir: &Path,
    old: u32,
    new: u32,
    parts: &[String],
) -> anyhow::Result<Status> {
    let (files, adrs, oi, ni) = supersede_pair(root, dir, old, new)?;
    let (o, n) = (&adrs[oi], &adrs[ni]);
    if o.status_value() != Some(AdrStatus::Accepted) {
        bail!(
            "{} is {}; only an Accepted record can be superseded in part",
            o.label(),
            o.status_value().map_or("without a valid status".into(), |s| s.to_string())
        );
    }
    let name = o.path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let items: Vec<String> = parts.iter().map(|p| format!("`{}`", p.trim())).collect();
    let line = format!("Supersedes in part [ADR-{old:04}]({name}): {}", items.join(", "));
    let text = edit::add_link(&files[ni].1, n, &line);
    // Lint NEW with the link: what it names must be OLD's.
    let mut after = adrs.clone();
    after[ni] = parse_adr(&n.path, &text);
    let link_line = after[ni]
        .links
        .iter()
        .find(|l| l.kind == LinkKind::SupersedesInPart && l.number == old)
        .map(|l| l.line);
    let wrong: Vec<Problem> = lint::lint_adrs(&after)
        .into_iter()
        .filter(|p| p.path == n.path && Some(p.line) == link_line)
        .collect();
    // Only the link was added: a parse problem NEW did not have before is the link's.
    let parse: Vec<String> = after[ni]
        .problems
        .iter()
        .filter(|p| !n.problems.contains(p))
        .map(|p| p.message.clone())
        .collect();
    if !wrong.is_empty() || link_line.is_none() || !parse.is_empty() {
        let why: Vec<String> = wrong.iter().map(|p| p.message.clone()).collect();
        bail!("cannot supersede {} in part: {}", o.label(), [why, parse].concat().join("; "));
    }
    write_file(&root.join(&n.path), &text)?;
    println!("{} lists `{line}`; {} stays live for the rest of its decision", n.label(), o.label());
    println!(
        "run `{} adr thresholds` to update {} once {} is Accepted",
        tool(),
        GATE_FILE,
        n.label()
    );
    Ok(Status::Success)
}

fn run_lint(root: &Path, dir: &Path) -> anyhow::Result<Status> {
    let report = lint::lint_dir(root, dir)?;
    print_problems(&report.problems);
    let records = plural(report.files, "record");
    if report.problems.is_empty() {
        println!("{}: {records}, no problems", dir.display());
    } else {
        let mut with: Vec<&Path> = report.problems.iter().map(|p| p.path.as_path()).collect();
        with.dedup();
        let problems = plural(report.problems.len(), "problem");
        if with.len() == report.files {
            println!("{}: {problems} in {records}", dir.display());
        } else {
            println!("{}: {problems} in {} of {records}", dir.display(), with.len());
        }
    }
    Ok(Status::from_ok(report.problems.is_empty()))
}

fn run_thresholds(root: &Path, dir: &Path, out: &Path, check: bool) -> anyhow::Result<Status> {
    let adrs = load_records(root, dir)?;
    let dir_text = dir.to_string_lossy().replace('\\', "/");
    let full = root.join(out);
    if check {
        let current = match std::fs::read_to_string(&full) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", out.display())),
        };
        return match live::check_in_sync(&adrs, &dir_text, current.as_deref()) {
            Err(problems) => {
                print_problems(&problems);
                Ok(Status::PolicyViolated)
            }
            Ok(live::SyncState::UpToDate) => {
                println!("{} is up to date", out.display());
                Ok(Status::Success)
            }
            Ok(live::SyncState::Missing { .. }) => {
                println!("{} does not exist; run `{} adr thresholds`", out.display(), tool());
                Ok(Status::PolicyViolated)
            }
            Ok(live::SyncState::OutOfDate { expected }) => {
                println!("{} is out of date; run `{} adr thresholds`:", out.display(), tool());
                for l in line_diff(current.as_deref().unwrap_or(""), &expected) {
                    println!("  {l}");
                }
                Ok(Status::PolicyViolated)
            }
        };
    }
    match live::generate(&adrs) {
        Err(problems) => {
            print_problems(&problems);
            Ok(Status::PolicyViolated)
        }
        Ok(t) => {
            write_file(&full, &render_file(&t, &dir_text))?;
            println!("wrote {} ({} thresholds)", out.display(), t.thresholds.len());
            Ok(Status::Success)
        }
    }
}

/// `adr alerts`: write (or with `check`, compare) the rules file and the manifest, in that order.
fn run_alerts(root: &Path, dir: &Path, outs: &[PathBuf; 2], check: bool) -> anyhow::Result<Status> {
    let adrs = load_records(root, dir)?;
    let (conds, r) = alerts::render_records(&adrs);
    let files = [(&outs[0], &r.rules), (&outs[1], &r.k8s)];
    if check {
        let mut stale = false;
        for (out, expected) in files {
            let current = match std::fs::read_to_string(root.join(out)) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    println!("{} does not exist; run `{} adr alerts`", out.display(), tool());
                    stale = true;
                    continue;
                }
                Err(e) => return Err(e).with_context(|| format!("cannot read {}", out.display())),
            };
            if current.replace("\r\n", "\n") == *expected {
                println!("{} is up to date", out.display());
            } else {
                println!("{} is out of date; run `{} adr alerts`:", out.display(), tool());
                for l in line_diff(&current, expected) {
                    println!("  {l}");
                }
                stale = true;
            }
        }
        return Ok(Status::from_ok(!stale));
    }
    for (out, text) in files {
        write_file(&root.join(out), text)?;
    }
    println!(
        "wrote {} and {} ({} from {})",
        outs[0].display(),
        outs[1].display(),
        plural(r.alerts, "alert"),
        plural(conds.len(), "rollback condition")
    );
    for m in &r.not_exportable {
        println!("not exportable: {m}");
    }
    for b in &r.budgets {
        println!("not an alert (a regression budget, decided by `bench ab` only): {b}");
    }
    for t in &r.load_bound {
        println!(
            "not an alert (holds the SLO at a chosen load, which production traffic does not \
             run at; decided by `gate` on a run at that load): {t}"
        );
    }
    Ok(Status::Success)
}
