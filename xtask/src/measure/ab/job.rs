//! *(runtime)* `bench ab` from its flags to its exit code: the base revision and the arms'
//! configs, the checks, the plan, each arm's engine, the measurement, the report.

use std::path::Path;

use anyhow::{Context, bail};
use infergate_model::ab::{self, AbFile, ArmInfo, Design, PlanInput, Stopped, Verdict};
use infergate_model::config::{Override, Source};
use infergate_model::summary::EngineParams;

use super::args::AbArgs;
use super::measure::{ArmRun, CliMeasure, shown};
use super::{arms, base};
use crate::engine_process::{self as serve, Engine};
use crate::exit::Status;
use crate::measure::bench::BenchCmd;
use crate::measure::flags::MeasureFlags;
use crate::thresholds::Thresholds;

/// Everything the gate runs from, resolved once before anything is measured.
struct Setup {
    plan: crate::plan::BenchPlan,
    base_label: String,
    governed_rel: String,
    governed: Source,
    base_text: String,
    cand_text: String,
    bench_sets: Vec<String>,
    cand_profile: infergate_model::config::ResolvedProfile,
    dir: std::path::PathBuf,
    checks: Vec<ab::BudgetCheck>,
    /// The live thresholds the gate leaves out, one note each (bound to another load).
    notes: Vec<String>,
    design: Design,
}

/// `bench ab`: set the gate up, measure it, report and exit as the gate.
pub fn run(
    root: &Path,
    args: &AbArgs,
    thresholds_file: &Path,
    github: bool,
) -> anyhow::Result<Status> {
    let stop = crate::measure::listen_for_stop()?;
    let setup = set_up(root, args, thresholds_file)?;
    let arms = start_arms(root, args, &setup)?;
    let file = ab_file(args, &setup, &arms);
    eprintln!(
        "A/B gate: {} against the working tree, profile `{}`, {} blocks of 4 trials x {} requests at most ({} requests), into {}",
        setup.base_label,
        setup.plan.profile.name,
        setup.design.blocks,
        setup.design.trial_requests,
        setup.design.planned_requests(),
        shown(&setup.dir, root)
    );
    let (design, checks, dir) = (&setup.design, &setup.checks, &setup.dir);
    let mut m = CliMeasure::new(&setup.plan, dir.clone(), (design.clone(), arms), file, stop);
    if !args.no_history {
        match crate::history_store::read(root) {
            Ok(h) => m.history = Some(h),
            Err(e) => m.file.notes.push(format!(
                "noise history: unreadable ({e:#}): not pooled, the gate's own blocks"
            )),
        }
    }
    let priors = m.file.priors.clone();
    let outcome = ab::run(design, &args.criteria(), checks, &priors, &mut m)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    m.file.status = outcome.status;
    m.file.stopped = Some(outcome.stopped);
    if !args.no_history && outcome.stopped != Stopped::Interrupted {
        let paired = ab::run::paired_differences(checks, &outcome.progress.trials);
        let metrics: Vec<_> = checks.iter().map(|c| c.metric).collect();
        let [base, cand] = &m.summaries;
        let line = crate::history_store::gating::append_ab(
            root,
            &setup.plan.run_id,
            [base, cand],
            paired,
            &metrics,
        );
        m.file.notes.push(line);
    }
    infergate_model::artifact::write(dir, &m.file).context("cannot write ab.json")?;
    if outcome.stopped == Stopped::Interrupted {
        eprintln!("interrupted: ab.json keeps the {} trials measured", m.file.trials.len());
    }
    println!("{}", super::report::render(&m.file));
    if github {
        for line in super::report::github(&m.file) {
            println!("{line}");
        }
    }
    println!("A/B gate: {}", shown(dir, root));
    Ok(match (outcome.stopped, outcome.status) {
        (Stopped::Interrupted, _) => Status::Interrupted,
        (_, Some(Verdict::Pass)) => Status::Success,
        (_, Some(Verdict::Fail)) => Status::PolicyViolated,
        _ => Status::Inconclusive,
    })
}

/// The base revision, the profile both arms run, the two configs, the checks and the plan.
fn set_up(root: &Path, args: &AbArgs, thresholds_file: &Path) -> anyhow::Result<Setup> {
    let (base, base_label) = base::base_revision(root, args.ab.as_deref().unwrap_or(""))?;
    let run_id = bench::runner::new_run_id();
    // Engine keys of --set change both arms' engine configs; the rest are bench settings.
    let (engine_both, bench_both) = arms::split_sets(&args.flags.sets, "--set")?;
    let flags = MeasureFlags { sets: bench_both, ..args.flags.clone() };
    let cmd = BenchCmd { flags, quiet: true, ..BenchCmd::default() };
    let plan = cmd.plan(root, run_id.clone())?;
    if args.engine.kind == Engine::Sim
        && let Some((name, _)) = &plan.profile.target
    {
        bail!(
            "profile `{}` measures target `{name}`; bench ab runs each arm in its own engine: \
             choose a profile without a target (the simulator) or pass --engine llama-cpp / vllm",
            plan.profile.name
        );
    }
    let governed_rel = args
        .engine_config
        .clone()
        .or_else(|| plan.profile.target.as_ref().and_then(|(_, t)| t.engine_config.clone()))
        .unwrap_or_else(|| plan.profile.profile.sim.engine_config.clone());
    let governed = Source::read_in(root, Path::new(&governed_rel))?;
    let (engine_sets, bench_sets) = arms::split_sets(&args.candidate_sets, "--candidate-set")?;
    let base_text = base::config_at(root, base, &governed_rel)?;
    let base_source = Source::new(governed_rel.clone(), base_text);
    infergate_model::config::EngineConfig::from_source(&base_source).with_context(|| {
        format!("{governed_rel} at the base revision is not a valid engine config")
    })?;
    let base_text = arms::candidate_text(&base_source, &engine_both)?;
    let cand_engine: Vec<_> = engine_both.iter().cloned().chain(engine_sets).collect();
    let cand_text = arms::candidate_text(&governed, &cand_engine)?;
    let dir = match &args.out {
        Some(d) => root.join(d),
        None => crate::measure::default_out_dir(root, "gate-ab", &run_id),
    };
    if dir.join(ab::AB_FILE).exists() {
        bail!("{} already holds an A/B gate; choose another --out", dir.display());
    }
    let extra: Vec<Override> = bench_sets
        .iter()
        .map(|s| Override::parse(s).map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<_>>()?;
    let cand_profile = plan.source.resolve(&extra)?;
    let thresholds =
        thresholds_file.exists().then(|| Thresholds::load(thresholds_file)).transpose()?;
    let (budget, budget_source) = args.budget();
    // The candidate's environment, for the simulator the device of its engine config; a real
    // engine's GPU is known once it runs.
    let environment = match args.engine.kind {
        Engine::Sim => toml::from_str::<toml::Table>(&cand_text)
            .ok()
            .and_then(|t| serde_json::to_value(t).ok())
            .map(|p| infergate_model::envkey::EnvironmentKey::simulated(&p)),
        _ => None,
    };
    // The load both arms run: a threshold bound to another is not the A/B gate's question.
    let load_of = |p: &infergate_model::config::ResolvedProfile| {
        serde_json::to_value(&p.profile)
            .ok()
            .and_then(|j| crate::thresholds::load::Load::of_config(&j))
    };
    let load = Some(load_of(&plan.profile)).filter(|l| *l == load_of(&cand_profile)).flatten();
    let checks = arms::checks(
        thresholds.as_ref(),
        &plan.profile.name,
        environment.as_ref(),
        load.as_ref(),
        (budget, &budget_source),
    )?;
    let notes = arms::not_applicable(
        thresholds.as_ref(),
        &plan.profile.name,
        environment.as_ref(),
        load.as_ref(),
    );
    let design = design(root, args, &plan)?;
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(Setup {
        plan,
        base_label,
        governed_rel,
        governed,
        base_text,
        cand_text,
        bench_sets,
        cand_profile,
        dir,
        checks,
        notes,
        design,
    })
}

/// The plan from the budget and the profile's workload.
fn design(root: &Path, args: &AbArgs, plan: &crate::plan::BenchPlan) -> anyhow::Result<Design> {
    let p = &plan.profile.profile;
    let loaded = bench::runner::prepare::load_workload(&p.workload, &p.load, root)?;
    let items = loaded.workload.items.len() as u32;
    let measured = p.load.requests.map_or(items, |n| n.min(u32::MAX as u64) as u32);
    Ok(Design::plan(&PlanInput {
        max_requests: args.max_requests,
        warmup_requests: p.load.warmup_requests.min(u32::MAX as u64) as u32,
        items,
        measured,
        trial_requests: args.trial_requests,
        looks: args.looks,
        spending: args.spending(),
        seed: args.seed,
    })?)
}

/// Each arm's config file in the gate's directory, its engine started (a real engine).
fn start_arms(root: &Path, args: &AbArgs, s: &Setup) -> anyhow::Result<[ArmRun; 2]> {
    let mut out = Vec::new();
    for (arm, text, sets, label) in [
        (ab::Arm::Baseline, &s.base_text, Vec::new(), s.base_label.clone()),
        (ab::Arm::Candidate, &s.cand_text, args.candidate_sets.clone(), "working tree".to_string()),
    ] {
        let file = s.dir.join(format!("engine-{}.toml", arm.as_str()));
        infergate_model::rundir::write_atomic(&file, text.as_bytes())
            .with_context(|| format!("cannot write {}", file.display()))?;
        let rel = shown(&file, root);
        let params = EngineParams::derived(
            &rel,
            toml_json(text)?,
            &s.governed_rel,
            &toml_json(&s.governed.text)?,
        );
        let engine = start_engine(root, args, (&file, text), &s.dir, arm)?;
        let profile =
            if arm == ab::Arm::Candidate { s.cand_profile.clone() } else { s.plan.profile.clone() };
        let mut all_sets = args.flags.sets.clone();
        all_sets.extend(sets);
        let info = ArmInfo {
            source: label,
            engine_config: Some(rel.clone()),
            config_hash: Some(arms::config_hash(text)),
            sets: all_sets,
            engine: args.engine.kind.describe("arm"),
        };
        out.push(ArmRun { arm, profile, config_rel: rel, params, engine, info });
    }
    out.try_into().map_err(|_| anyhow::anyhow!("an A/B gate has two arms"))
}

/// The `ab.json` the gate starts from.
fn ab_file(args: &AbArgs, s: &Setup, arms: &[ArmRun; 2]) -> AbFile {
    let mut notes = s.notes.clone();
    if s.base_text == s.cand_text && s.bench_sets.is_empty() {
        notes.push(format!(
            "the candidate runs the same {} as the baseline: an A/A check",
            s.governed_rel
        ));
    }
    AbFile {
        format_version: 1,
        run_id: s.plan.run_id.clone(),
        profile: s.plan.profile.name.clone(),
        baseline: arms[0].info.clone(),
        candidate: arms[1].info.clone(),
        design: s.design.clone(),
        criteria: args.criteria(),
        checks: s.checks.clone(),
        priors: Default::default(),
        warmup: Vec::new(),
        trials: Vec::new(),
        looks: Vec::new(),
        status: None,
        stopped: None,
        requests: 0,
        notes,
    }
}

fn toml_json(text: &str) -> anyhow::Result<serde_json::Value> {
    let t: toml::Table = toml::from_str(text).context("an engine config that is not TOML")?;
    Ok(serde_json::to_value(t)?)
}

/// The arm's engine process for llama.cpp and vLLM; none for the simulator.
fn start_engine(
    root: &Path,
    args: &AbArgs,
    (file, text): (&Path, &str),
    dir: &Path,
    arm: ab::Arm,
) -> anyhow::Result<Option<serve::EngineProcess>> {
    if args.engine.kind == Engine::Sim {
        return Ok(None);
    }
    eprintln!("starting the {}'s engine ({})", arm.as_str(), args.engine.kind.describe("arm"));
    let log = dir.join(format!("engine-{}.log", arm.as_str()));
    args.engine.start(root, (file, text), log)
}
