//! `adr new` from summaries built in code: the generated record (snapshot) and what lint says.

use chrono::NaiveDate;
use xtask::adr::lint::lint_files;
use xtask::adr::new::{NewAdr, render};
use xtask::adr::parse_adr;
use xtask::thresholds::rule::{Action, Comparator};

fn runs() -> (infergate_model::Summary, Vec<infergate_model::Summary>) {
    let base = crate::support::summary(
        "20250501-base",
        420.5,
        31.25,
        0.81,
        crate::support::engine_params(false, 8192),
    );
    let mut exp1 = crate::support::summary(
        "20250501-exp1",
        260.0,
        33.0,
        0.9,
        crate::support::engine_params(true, 8192),
    );
    exp1.simulated = true;
    exp1.notes.push("token counts from content events (no usage reported)".into());
    let mut exp2 = crate::support::summary(
        "20250501-exp2",
        182.345,
        28.1,
        0.97,
        crate::support::engine_params(true, 2048),
    );
    exp2.server = None; // KV fragmentation not scraped: stays blank, no threshold
    // The commands that made them (exp1 predates recorded commands: blank).
    let mut base = base;
    base.invocation = Some(invocation("cargo xtask bench --profile default --out runs/base"));
    exp2.invocation = Some(invocation(
        "cargo xtask bench --profile default --set 'workload.input_lengths=[128,256]' --out runs/exp2",
    ));
    (base, vec![exp1, exp2])
}

fn invocation(command: &str) -> infergate_model::summary::Invocation {
    infergate_model::summary::Invocation { command: command.into(), part: None }
}

fn input<'a>(
    base: &'a infergate_model::Summary,
    exps: &'a [infergate_model::Summary],
    choose: usize,
) -> NewAdr<'a> {
    NewAdr {
        number: 3,
        title: "Enable chunked prefill with 2k batched tokens",
        date: NaiveDate::from_ymd_opt(2025, 5, 2).unwrap(),
        deciders: Some("Platform team"),
        headroom: 0.10,
        baseline: base,
        experiments: exps,
        choose,
        run_dirs: &[],
        charts: &[],
        assets: &[],
        record_dir: "docs/adr",
        stats: &[],
        considered: &[],
        refreshed: &[],
        sources: &[],
        capacities: &[],
    }
}

#[test]
fn generated_record_snapshot() {
    let (base, exps) = runs();
    let text = render(&input(&base, &exps, 2)).unwrap();
    insta::assert_snapshot!("generated_adr", text);
}

#[test]
fn generated_record_parses_and_only_the_human_parts_fail_lint() {
    let (base, exps) = runs();
    let text = render(&input(&base, &exps, 2)).unwrap();
    let path =
        std::path::PathBuf::from("docs/adr/0003-enable-chunked-prefill-with-2k-batched-tokens.md");
    let problems = lint_files(&[(path.clone(), text.clone())]);
    let adr = parse_adr(&path, &text);
    let context = adr.section(xtask::adr::SectionKind::Context).unwrap().line;
    let consequences = adr.section(xtask::adr::SectionKind::Consequences).unwrap().line;
    let lines: Vec<usize> = problems.iter().map(|p| p.line).collect();
    assert_eq!(lines, vec![context + 2, consequences + 2], "{problems:#?}");
    assert!(
        problems.iter().all(|p| p.message.starts_with("template placeholder `<")),
        "{problems:#?}"
    );
    // Each proposed threshold is a rollback condition on its breaking side, for 5 minutes:
    // the blocking ones roll back, the warnings are investigated.
    let conds: Vec<(String, &str, u64)> = adr
        .rollback
        .iter()
        .map(|c| (format!("{} {}", c.metric, c.comparator), c.action.as_str(), c.window.seconds))
        .collect();
    assert_eq!(conds.len(), adr.thresholds.len(), "{conds:?}");
    assert!(conds.contains(&("metrics.ttft_ms.p99 >".into(), "roll back", 300)), "{conds:?}");
    assert!(conds.contains(&("goodput.ratio <".into(), "roll back", 300)), "{conds:?}");
    assert!(conds.contains(&("metrics.itl_jitter >".into(), "investigate", 300)), "{conds:?}");

    // The decision lines are the chosen experiment's changes, with TOML values.
    let decided: Vec<String> = adr.decisions.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        decided,
        vec![
            "configs/engine.toml: scheduler.enable_chunked_prefill = true",
            "configs/engine.toml: scheduler.max_num_batched_tokens = 2048",
        ]
    );
    // Thresholds: every measured matrix metric of Exp-2, from its value with 10% headroom rounded
    // away from it to three significant digits, worked by hand (TTFT P99 182.345 -> 201, TPOT
    // P99 28.1 -> 31.0, ITL jitter 0.123 -> 0.136, goodput 0.97 -> 0.873, throughput 1344 ->
    // 1200, cost 0.5167 -> 0.569); KV fragmentation was not measured, so it has none.
    let want = vec![
        ("metrics.ttft_ms.p99".to_string(), Comparator::Le, 201.0, Action::Block),
        ("metrics.tpot_ms.p99".to_string(), Comparator::Le, 31.0, Action::Block),
        ("metrics.itl_jitter".to_string(), Comparator::Le, 0.136, Action::Warn),
        ("goodput.ratio".to_string(), Comparator::Ge, 0.873, Action::Block),
        ("throughput.output_tokens_per_s".to_string(), Comparator::Ge, 1200.0, Action::Warn),
        ("cost.per_1m_output_tokens".to_string(), Comparator::Le, 0.569, Action::Warn),
    ];
    let got: Vec<_> = adr
        .thresholds
        .iter()
        .map(|t| (t.metric.to_string(), t.comparator, t.limit, t.action))
        .collect();
    assert_eq!(got, want);
    assert!(got.iter().all(|(m, ..)| m != "server.kv_fragmentation"));
    assert!(
        text.contains(
            "| Exp-2 | 80 | 182.3 (-238.2, -56.6%) | 28.1 (-3.15, -10.1%) | 0.123 (=) | 0.97 \
             (+0.16, +19.8%) | 1344 (=) | — | 0.5167 (=) | chosen: better: TTFT P99 -56.6%, TPOT \
             P99 -10.1%, Goodput +19.8% |"
        ),
        "{text}"
    );
    assert!(text.contains("| Exp-1 (simulated) |"));
}

#[test]
fn keeping_the_baseline_pins_its_parameters() {
    let (base, _) = runs();
    let text = render(&input(&base, &[], 0)).unwrap();
    let adr = parse_adr("docs/adr/0003-x.md".as_ref(), &text);
    assert_eq!(adr.decisions.len(), 7, "{text}");
    // "Keep the baseline configuration": the decision pins each of its parameters.
    insta::assert_snapshot!("generated_adr_keep_baseline", text);
    // Thresholds come from the baseline itself.
    let ttft = adr.thresholds.iter().find(|t| t.metric == "metrics.ttft_ms.p99").unwrap();
    assert_eq!(ttft.limit, 463.0);
}

#[test]
fn unknown_engine_parameters_leave_a_placeholder_not_a_guess() {
    let (mut base, exps) = runs();
    base.engine = None;
    let text = render(&input(&base, &exps, 2)).unwrap();
    assert!(text.contains("not recorded (a run has no engine parameters)"));
    let adr = parse_adr("docs/adr/0003-x.md".as_ref(), &text);
    assert!(adr.decisions.is_empty());
    let decision = adr.section(xtask::adr::SectionKind::Decision).unwrap();
    assert!(adr.placeholders.iter().any(|p| p.line > decision.line && p.line < decision.end));
    assert!(
        render(&input(&base, &exps, 3))
            .unwrap_err()
            .to_string()
            .contains("--choose 3 names no experiment")
    );
}

#[test]
fn a_key_the_experiment_drops_becomes_a_removal_line() {
    let (base, mut exps) = runs();
    let exp = &mut exps[1];
    let engine = exp.engine.as_mut().unwrap();
    engine.params["scheduler"].as_object_mut().unwrap().remove("max_num_batched_tokens");
    let text = render(&input(&base, &exps, 2)).unwrap();
    let adr = parse_adr("docs/adr/0003-x.md".as_ref(), &text);
    let decided: Vec<String> = adr.decisions.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        decided,
        vec![
            "configs/engine.toml: scheduler.enable_chunked_prefill = true",
            "configs/engine.toml: scheduler.max_num_batched_tokens removed",
        ],
        "{text}"
    );
    assert_eq!(adr.decisions[1].value, xtask::adr::Decided::Removed);
    assert!(adr.problems.is_empty(), "{:#?}", adr.problems);
    assert!(text.contains("`configs/engine.toml: scheduler.max_num_batched_tokens = 8192`"));
}

#[test]
fn sweeps_and_acceptance_runs_feed_the_matrix() {
    use infergate_model::sweep::{SweepSpec, SweepSummary};
    let dir = tempfile::tempdir().unwrap();
    let (base, exps) = runs();
    let write_run = |d: &std::path::Path, s: &infergate_model::Summary| {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("summary.json"), serde_json::to_string_pretty(s).unwrap()).unwrap();
    };
    // An acceptance directory: baseline/ and candidate/ run directories with extra.acceptance.
    let acc = dir.path().join("acc");
    let mut b = base.clone();
    let mut c = exps[0].clone();
    let section = |role: &str| {
        let verdict = |v: &str| Some(v.to_string());
        Some(infergate_model::summary::AcceptanceSection {
            role: role.into(),
            passed: false,
            numeric: infergate_model::summary::NumericVerdict {
                verdict: verdict("pass"),
                ..Default::default()
            },
            engine: infergate_model::summary::EngineVerdict {
                verdict: verdict("fail"),
                ..Default::default()
            },
            business: infergate_model::summary::BusinessVerdict {
                verdict: verdict("skipped"),
                ..Default::default()
            },
            ..Default::default()
        })
    };
    b.extra.acceptance = section("baseline");
    c.extra.acceptance = section("candidate");
    write_run(&acc.join("baseline"), &b);
    write_run(&acc.join("candidate"), &c);
    std::fs::write(acc.join("acceptance.json"), "{}").unwrap();
    // A sweep directory whose knee is its second stage.
    let sw = dir.path().join("sweep");
    let mut stages = Vec::new();
    for (i, load) in [32.0, 128.0].into_iter().enumerate() {
        let mut s = exps[1].clone();
        s.run_id = format!("stage-{i}");
        s.invocation = Some(infergate_model::summary::Invocation {
            command: "cargo xtask bench --sweep concurrency=32,128 --out sweep".into(),
            part: Some(format!("concurrency {}", load as u64)),
        });
        let stage_dir = format!("stage-0{}-concurrency-{load}", i + 1);
        write_run(&sw.join(&stage_dir), &s);
        let mut r = infergate_model::sweep::StageResult::from_summary(i + 1, load, stage_dir, &s);
        r.meets_slo = true;
        r.violations.clear();
        stages.push(r);
    }
    let spec: SweepSpec = "concurrency=32,128".parse().unwrap();
    let slo = infergate_model::metrics::Slo { ttft_ms: Some(500.0), ..Default::default() };
    let sweep = SweepSummary::new("sw".into(), &spec, Default::default(), slo, stages);
    infergate_model::sweep::write(&sw, &sweep).unwrap();

    use xtask::adr::new::resolve_run_dir;
    assert_eq!(resolve_run_dir(&acc, true).unwrap(), acc.join("baseline"));
    assert_eq!(resolve_run_dir(&acc, false).unwrap(), acc.join("candidate"));
    assert_eq!(resolve_run_dir(&sw, false).unwrap(), sw.join("stage-02-concurrency-128"));
    let plain = acc.join("baseline");
    assert_eq!(resolve_run_dir(&plain, false).unwrap(), plain);

    let b = infergate_model::Summary::read(&resolve_run_dir(&acc, true).unwrap()).unwrap();
    let e1 = infergate_model::Summary::read(&resolve_run_dir(&acc, false).unwrap()).unwrap();
    let e2 = infergate_model::Summary::read(&resolve_run_dir(&sw, false).unwrap()).unwrap();
    let exps = vec![e1, e2];
    let text = render(&input(&b, &exps, 2)).unwrap();
    let header = text.lines().find(|l| l.starts_with("| Config |")).unwrap();
    assert!(header.contains("| Knee | Acceptance | Conclusion |"), "{header}");
    assert!(header.contains("Cost / 1M output tokens"), "{header}");
    let row = |label: &str| {
        text.lines().find(|l| l.starts_with(&format!("| {label}"))).unwrap().to_string()
    };
    // The sweep's stage is named by its load, in the label and in the knee column.
    assert!(row("concurrency 128 |").contains("| concurrency 128 |"), "{text}");
    assert!(!text.contains("Exp-2"), "{text}");
    assert!(
        row("Exp-1").contains("not accepted: numeric pass, engine fail, business skipped"),
        "{}",
        row("Exp-1")
    );
    assert!(row("Baseline").contains("| — |"), "{}", row("Baseline"));

    // Through the command: the record names each resolved run directory (the sweep's knee
    // stage, the acceptance sides) and links the chart the sweep wrote.
    std::fs::write(sw.join("sweep.svg"), "<svg/>").unwrap();
    let out = crate::support::xtask(
        dir.path(),
        &[
            "adr",
            "new",
            "From a sweep",
            "--baseline",
            "./acc",
            "--exp",
            "acc",
            "--exp",
            "sweep",
            "--choose",
            "2",
        ],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let record = std::fs::read_to_string(dir.path().join("docs/adr/0001-from-a-sweep.md")).unwrap();
    // Run directories and the chart are links relative to the record (docs/adr/).
    assert!(
        record.contains("| Baseline | `20250501-base` | [acc/baseline](../../acc/baseline) |"),
        "{record}"
    );
    assert!(
        record
            .contains("| [sweep/stage-02-concurrency-128](../../sweep/stage-02-concurrency-128) |"),
        "{record}"
    );
    assert!(
        record.contains("Charts the runs wrote: [sweep/sweep.svg](../../sweep/sweep.svg)."),
        "{record}"
    );
    insta::with_settings!({filters => vec![(r"Date: \d{4}-\d{2}-\d{2}", "Date: [date]")]}, {
        insta::assert_snapshot!("generated_adr_sweep", record);
    });
    // Without sweeps or acceptance runs the matrix keeps its columns.
    let (base, exps) = runs();
    let plain_text = render(&input(&base, &exps, 2)).unwrap();
    assert!(!plain_text.contains("| Knee |") && !plain_text.contains("Acceptance |"));
}

#[test]
fn a_chosen_run_missing_its_slo_is_flagged_and_kept_from_acceptance_until_a_person_says_why() {
    let (base, mut exps) = runs();
    // The reproduction: TTFT P99 1012 ms against a 500 ms SLO, goodput 0.28, chosen.
    exps[1] = crate::support::summary(
        "20250501-exp2",
        1012.0,
        28.1,
        0.28,
        crate::support::engine_params(true, 2048),
    );
    let text = render(&input(&base, &exps, 2)).unwrap();
    // "> **SLO missed:** Exp-2, the chosen configuration, measured TTFT P99 1012 ms above the
    // SLO's 500 ms (goodput 0.28)."; the limits beside the SLO: the proposed TTFT limit, 1120
    // ms, "500 ms (the limit is above it)"; an `SLO exception: <why ...>` line to fill in.
    insta::assert_snapshot!("generated_adr_slo_missed", text);
    let path = std::path::PathBuf::from("docs/adr/0003-x.md");
    let filled = text
        .replace("<the scenario in words: who is affected, the symptom (P99, goodput, cost) and what triggered this tuning>", "Story.")
        .replace("<what changes for operators, capacity and cost; what this decision gives up>", "Costs.");
    // The reason is a placeholder: lint reports it.
    let problems = lint_files(&[(path.clone(), filled.clone())]);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].message.contains("template placeholder `<why this configuration"),
        "{}",
        problems[0]
    );
    // Removing the reason line does not help: the flag needs it.
    let no_reason: String = filled
        .lines()
        .filter(|l| !l.starts_with("SLO exception:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let problems = lint_files(&[(path.clone(), no_reason)]);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].message.contains("misses its SLO and no `SLO exception: <why>` line"),
        "{}",
        problems[0]
    );
    // A person's reason: clean.
    let stated = filled.replace(
        "SLO exception: <why this configuration is adopted although it misses the SLO>",
        "SLO exception: the SLO is renegotiated for batch traffic in ticket 42.",
    );
    assert_eq!(lint_files(&[(path, stated)]), vec![]);
}

#[test]
fn runs_of_different_files_scenarios_and_directories_are_said_so() {
    let (base, mut exps) = runs();
    // Exp-2 ran with another engine file, at another concurrency, on another host.
    let e = exps[1].engine.as_mut().unwrap();
    e.file = "configs/engine-tuned.toml".into();
    exps[1].config.profile_mut().unwrap().load.concurrency = 32;
    exps[1].environment.hostname = Some("other-host".into());
    exps[1].environment_fingerprint = "ffff".into();
    let dirs = ["runs/base".to_string(), "runs/exp1".into(), "runs/exp2".into()];
    let mut inp = input(&base, &exps, 2);
    inp.run_dirs = &dirs;
    let charts = ["runs/sweep/sweep.svg".to_string()];
    inp.charts = &charts;
    let text = render(&inp).unwrap();
    // File to file: each side names its own file; the rollback restores the baseline's values
    // in the baseline's file; the decision names the file the change is made in. The scenario
    // fields that differ are named ("> **Not like for like:** Exp-2 differs from the baseline
    // in `load.concurrency` 64 -> 32, host ..."). Each row names its run directory and the
    // command that made it, as it can be pasted (blank where the run recorded none), and the
    // charts the runs wrote are linked.
    insta::assert_snapshot!("generated_adr_file_to_file", text);
    assert!(!text.contains("> **Not like for like:** Exp-1"), "{text}");
}

#[test]
fn the_scenario_names_the_workload_files_and_a_changed_content_is_not_like_for_like() {
    use infergate_model::workload::WorkloadFile;
    let (mut base, mut exps) = runs();
    let trace = "configs/workloads/mooncake-sample.jsonl";
    for s in std::iter::once(&mut base).chain(exps.iter_mut()) {
        let load = &mut s.config.profile_mut().unwrap().load;
        (load.mode, load.time_scale) = (infergate_model::config::LoadMode::Trace, 0.5);
        s.workload.files = vec![WorkloadFile::of(trace, b"{\"timestamp\": 0}")];
    }
    exps[1].workload.files = vec![WorkloadFile::of(trace, b"{\"timestamp\": 1}")];
    let (old, new) = (&base.workload.files[0].hash, &exps[1].workload.files[0].hash);
    let text = render(&input(&base, &exps, 2)).unwrap();
    let scenario = text.lines().find(|l| l.starts_with("Measured scenario:")).unwrap();
    assert!(scenario.contains("trace replay at time scale 0.5"), "{scenario}");
    assert!(scenario.contains(&format!("workload file `{trace}` (`{old}`)")), "{scenario}");
    assert!(
        text.contains(&format!(
            "> **Not like for like:** Exp-2 differs from the baseline in workload file `{trace}` content `{old}` -> `{new}`"
        )),
        "{text}"
    );
    assert!(!text.contains("> **Not like for like:** Exp-1"), "{text}");
}

/// A workspace whose default profile runs the engine simulator with a small workload, and an
/// engine config that sets no `[batch]` key.
fn comparison_workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("configs")).unwrap();
    std::fs::write(
        dir.path().join("configs/bench.toml"),
        "[profile.default.load]\nconcurrency = 4\nwarmup_requests = 0\n\
         [profile.default.workload]\ninput_lengths = [64, 128]\nrepeats = 4\nmax_tokens = 8\n\
         [profile.default.sim]\nengine_config = \"configs/engine.toml\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("configs/engine.toml"),
        "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 4096\n\
         [device]\nname = \"H100-SXM-80GB\"\nprice_per_hour = 2.0\n",
    )
    .unwrap();
    dir
}

#[test]
fn a_strategy_comparison_becomes_a_record_of_its_strategies_in_the_governed_file() {
    let ws = comparison_workspace();
    let root = ws.path();
    let out = crate::support::xtask(
        root,
        &["bench", "-q", "--out", "runs/cmp", "--compare-strategies", "serial,continuous"],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    // Each summary records the variant the simulator ran, the governed file and the command.
    let s = infergate_model::Summary::read(&root.join("runs/cmp/continuous")).unwrap();
    let engine = s.engine.as_ref().unwrap();
    assert_eq!(engine.file, "runs/cmp/engine-continuous.toml");
    assert_eq!(engine.derived_from.as_deref(), Some("configs/engine.toml"));
    let keys: Vec<(&str, bool)> =
        engine.changes.iter().map(|c| (c.key.as_str(), c.from.is_none())).collect();
    assert_eq!(keys, vec![("batch.strategy", true)]);
    let invocation = s.invocation.as_ref().unwrap();
    assert!(
        invocation
            .command
            .ends_with(" bench -q --out runs/cmp --compare-strategies serial,continuous")
            && invocation.command.starts_with("cargo xtask -C "),
        "{}",
        invocation.command
    );
    assert_eq!(invocation.part.as_deref(), Some("continuous"));

    // The comparison directory as baseline (its first strategy) and as experiments (the rest).
    let out = crate::support::xtask(
        root,
        &["adr", "new", "Continuous batching", "--baseline", "runs/cmp", "--exp", "runs/cmp"],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let path = root.join("docs/adr/0001-continuous-batching.md");
    let record = std::fs::read_to_string(&path).unwrap();
    // Rows named by strategy; the decision names the governed file and says the key is added.
    assert!(record.contains("| Baseline (serial) (simulated) |"), "{record}");
    assert!(record.contains("| continuous (simulated) |"), "{record}");
    assert!(!record.contains("Exp-1"), "{record}");
    assert!(
        record.contains("- configs/engine.toml: batch.strategy = \"continuous\"\n"),
        "{record}"
    );
    assert!(
        record.contains(
            "Added to `configs/engine.toml`, which does not set it yet: `batch.strategy`."
        ),
        "{record}"
    );
    assert!(record.contains("- remove `batch.strategy` from `configs/engine.toml`"), "{record}");
    assert!(!record.contains("configs/engine.toml: batch.strategy = \"serial\""), "{record}");
    assert!(record.contains("| [runs/cmp/continuous](../../runs/cmp/continuous) |"), "{record}");
    // The decision lines parse and name the governed file.
    let adr = xtask::adr::parse_adr(&path, &record);
    let decided: Vec<String> = adr.decisions.iter().map(|d| d.to_string()).collect();
    assert_eq!(decided, vec!["configs/engine.toml: batch.strategy = \"continuous\""]);
    // The root as a pattern: its text taken literally, and the quotes a shell command puts
    // around it when it holds a space.
    let literal: String = root
        .display()
        .to_string()
        .chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$#&-~".contains(c);
            special.then_some('\\').into_iter().chain(std::iter::once(c))
        })
        .collect();
    let root_text = format!("'?{literal}'?");
    let filters = vec![
        (r"Date: \d{4}-\d{2}-\d{2}", "Date: [date]"),
        (root_text.as_str(), "[root]"),
        (r"\d{8}T\d{6}Z-[0-9a-f]{4}", "[run id]"),
        (r"\| -?\d+(\.\d+)?( ± [0-9.]+[*~]*)?( \([^)|]*\))? ", "| [measured] "),
        (r"\| ([+-]\d+(\.\d+)?%|no regression \(noise too large\)) \|", "| [detects] |"),
        (r"(: none \(the noise is as large as the value\)| \d+(\.\d+)?% worse)", " [detects]"),
        // The environment cell, whatever the CPU's name holds (parentheses, commas, an escaped `|`).
        (r"`[0-9a-f]{16}` \((?:[^|\\]|\\.)*\) \|", "[environment] |"),
        (r"infergate \d+\.\d+\.\d+", "infergate [version]"),
        (r"measured -?\d+(\.\d+)?", "measured [value]"),
        (r"(above|below) \d+(\.\d+)?", "$1 [limit]"),
        (
            r"the gate's \d+(\.\d+)? (\w+) lies inside a bucket of (\S+): \d+(\.\d+)? is",
            "the gate's [limit] $2 lies inside a bucket of $3: [bound] is",
        ),
        (r"(chosen|reference): [^|\n]*\|", "$1: [conclusion] |"),
        // How busy this machine was while the runs measured is not the record's to pin.
        (r"- [^\n]*: the client host was busy during the load: [^\n]*\n", ""),
    ];
    insta::with_settings!({filters => filters}, {
        insta::assert_snapshot!("generated_adr_strategies", record);
    });
}

/// A goodput that goes from 0 to 1 is a change of +1, not "+0.0%" (no percentage of 0).
#[test]
fn a_change_from_zero_is_stated_as_the_change() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let set = |name: &str, goodput: &[f64]| {
        let trials: Vec<infergate_model::Summary> = goodput
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let engine = crate::support::engine_params(true, 8192);
                crate::support::summary(&format!("t{i}"), 200.0, 40.0, *g, engine)
            })
            .collect();
        crate::support::write_set(&runs.join(name), &trials);
    };
    set("base", &[0.0, 0.0, 0.0]);
    set("exp", &[1.0, 0.99, 1.0]);
    let out = crate::support::xtask(
        tmp.path(),
        &["adr", "new", "Goodput", "--baseline", "runs/base", "--exp", "runs/exp"],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let text = std::fs::read_to_string(tmp.path().join("docs/adr/0001-goodput.md")).unwrap();
    let row = text.lines().find(|l| l.starts_with("| Exp-1 |")).unwrap();
    assert!(!row.contains("+0.0%"), "{row}");
    assert!(
        row.contains("better: Goodput +0.993 (from 0.003)")
            || row.contains("(from 0)")
            || row.contains("Goodput +"),
        "{row}"
    );
}

#[test]
fn trial_sets_give_estimates_significance_and_limits_beyond_the_interval() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("runs")).unwrap();
    crate::support::trial_set(&tmp.path().join("runs"), "base", &[200.0, 210.0, 190.0]);
    crate::support::trial_set(&tmp.path().join("runs"), "exp", &[100.0, 102.0, 98.0]);
    let out = crate::support::xtask(
        tmp.path(),
        &["adr", "new", "Trials", "--baseline", "runs/base", "--exp", "runs/exp"],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let text = std::fs::read_to_string(tmp.path().join("docs/adr/0001-trials.md")).unwrap();
    // TTFT P99: base 200, s = 10, half width t(0.975, 2) x 10 / sqrt(3) = 24.84;
    // exp 100, s = 2, half width 4.968. TPOT P99 is 40 in every trial: no spread. 80 requests
    // a trial are too few for a P99 (`*`). Each value is shown to the precision of its
    // half-width, the half-width to two significant digits.
    assert!(text.contains("| Baseline | 240 (3 trials) | 200 ± 25* | 40 ± 0* |"), "{text}");
    assert!(
        text.contains(
            "| Exp-1 | 240 (3 trials) | 100.0 ± 5.0* (-100, -50.0%, significant) | 40 ± 0* (=) |"
        ),
        "{text}"
    );
    assert!(text.contains("chosen: better: TTFT P99 -50.0% |"), "{text}");
    // The limit: the interval's upper end 104.968 + 10% of 100, rounded up to 3 digits.
    let row = text
        .lines()
        .find(|l| l.starts_with("| `metrics.ttft_ms.p99` | <= |"))
        .expect("a TTFT threshold");
    assert!(
        row.starts_with(
            "| `metrics.ttft_ms.p99` | <= | 115 | ms | block | 100.0 ± 5.0* (3 trials) | +"
        ),
        "{row}"
    );
    // What it detects with 95% power: r = 4.968 / 4.3027 / 100, δ* ≈ 7.7 for 2 degrees of
    // freedom: 115 / (1 - 7.7 r) = 126.2, a regression of about 26%.
    let detects: f64 =
        row.split(" | ").nth(6).unwrap().trim_matches(|c| c == '+' || c == '%').parse().unwrap();
    assert!(detects > 24.0 && detects < 28.0, "{row}");
    assert!(text.contains("a regression of at least: TTFT P99 "), "{text}");
    // Goodput 0.95 in every trial: 0.95 - 10% of 0.95.
    assert!(
        text.contains("| `goodput.ratio` | >= | 0.855 | ratio | block | 0.95 ± 0 (3 trials) |"),
        "{text}"
    );
    // The thresholds parse into gate.toml as written.
    let adr = xtask::adr::parse_adr(std::path::Path::new("docs/adr/0001-trials.md"), &text);
    let t = adr.thresholds.iter().find(|t| t.metric == "metrics.ttft_ms.p99").unwrap();
    assert_eq!((t.comparator, t.limit), (Comparator::Le, 115.0));
}

/// `adr new` draws the record's charts from the runs' records into `docs/adr/assets/` and
/// links them; `adr lint` finds a linked chart that is missing.
#[cfg(feature = "runtime")]
#[test]
fn adr_new_writes_the_records_charts_and_lint_checks_them() {
    let r = crate::report::repo("");
    for (out, tokens) in [("runs/base", "4"), ("runs/exp", "6")] {
        let o =
            crate::support::xtask(r.path(), &["bench", "-q", "--out", out, "--max-tokens", tokens]);
        assert_eq!(o.code, 0, "{}", o.stderr);
    }
    let args = ["adr", "new", "Longer answers", "--baseline", "runs/base", "--exp", "runs/exp"];
    let o = crate::support::xtask(r.path(), &args);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("wrote docs/adr/assets/0001-latency.svg"), "{}", o.stdout);
    let svg = std::fs::read_to_string(r.path().join("docs/adr/assets/0001-latency.svg")).unwrap();
    let ttft = crate::report::series(crate::report::chart(&svg, "ttft-cdf"));
    let names: Vec<&str> = ttft.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(names.len(), 2, "{ttft:?}");
    assert!(ttft.iter().all(|s| s.1 == 12), "{ttft:?}");
    let record = std::fs::read_to_string(r.path().join("docs/adr/0001-longer-answers.md")).unwrap();
    assert!(record.contains("](assets/0001-latency.svg)"), "{record}");
    let lint = crate::support::xtask(r.path(), &["adr", "lint"]);
    assert!(!lint.stdout.contains("assets/"), "{}", lint.stdout);
    std::fs::remove_file(r.path().join("docs/adr/assets/0001-latency.svg")).unwrap();
    let lint = crate::support::xtask(r.path(), &["adr", "lint"]);
    assert_eq!(lint.code, 1);
    assert!(
        lint.stdout.contains(
            "links assets/0001-latency.svg, which does not exist (docs/adr/assets/0001-latency.svg)"
        ),
        "{}",
        lint.stdout
    );
}

/// The thresholds `adr new` proposes hold for one environment: a chosen trial set whose trials
/// recorded different GPUs is refused, naming each trial's environment; a baseline measured on
/// another GPU than the chosen run is a warning, and the record is keyed to the chosen run's.
#[test]
fn the_chosen_runs_must_share_one_environment() {
    use infergate_model::summary::GpuInfo;
    let on = |id: &str, gpu: &str| {
        let mut s = crate::support::summary(
            id,
            180.0,
            20.0,
            0.97,
            crate::support::engine_params(true, 2048),
        );
        s.environment.gpu = Some(GpuInfo { name: gpu.into(), driver: "550".into(), count: 1 });
        s
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    crate::support::write_set(
        &root.join("runs/mixed"),
        &[on("t1", "NVIDIA H100 80GB HBM3"), on("t2", "NVIDIA A100-SXM4-80GB")],
    );
    let o = crate::support::xtask(root, &["adr", "new", "Mixed", "--baseline", "runs/mixed"]);
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("were measured on different environments"), "{}", o.stderr);
    for gpu in ["gpu=NVIDIA H100 80GB HBM3 x1", "gpu=NVIDIA A100-SXM4-80GB x1"] {
        assert!(o.stderr.contains(gpu), "{gpu}: {}", o.stderr);
    }
    assert!(!root.join("docs/adr").exists(), "no record is written");
    // A baseline on another GPU: written, keyed to the chosen run's GPU, with a warning.
    crate::support::write_run(&root.join("runs"), &on("a100", "NVIDIA A100-SXM4-80GB"));
    crate::support::write_run(&root.join("runs"), &on("h100", "NVIDIA H100 80GB HBM3"));
    let o = crate::support::xtask(
        root,
        &["adr", "new", "Move", "--baseline", "runs/a100", "--exp", "runs/h100"],
    );
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("warning: runs/a100 was measured on `gpu=NVIDIA A100"),
        "{}",
        o.stderr
    );
    let text = std::fs::read_to_string(crate::support::new_record(root)).unwrap();
    let key = "`gpu=NVIDIA H100 80GB HBM3 x1; engine=local-vllm; model=test-model; dtype=float16`";
    assert!(text.contains(&format!("| {key} |")), "{text}");
    assert!(!text.contains("A100-SXM4-80GB x1;"), "{text}");
}

#[test]
fn a_run_whose_profile_gates_on_its_plateau_is_recorded_with_the_plateaus_figures() {
    let (base, mut exps) = runs();
    let chosen = &mut exps[1];
    chosen.config.profile_mut().expect("a bench run's profile").steady.gate = true;
    let mut plateau = infergate_model::steady::none(String::new());
    plateau.reason = None;
    let mut ttft = chosen.metrics.ttft_ms.clone().expect("the fixture's TTFT");
    ttft.p99 = 150.0;
    plateau.metrics.ttft_ms = Some(ttft);
    chosen.plateau = Some(plateau);
    let text = render(&input(&base, &exps, 2)).unwrap();
    assert!(text.contains("**Plateau:** the figures of"), "{text}");
    // The threshold proposed from the chosen run is its plateau's P99 plus the 10% headroom
    // (165), not the whole window's 182.345 (201, rounded).
    let limit = |text: &str| -> String {
        text.lines().find(|l| l.contains("metrics.ttft_ms.p99") && l.contains("<=")).unwrap().into()
    };
    assert!(limit(&text).contains("| 165 |"), "{}", limit(&text));
    exps[1].config.profile_mut().unwrap().steady.gate = false;
    let whole = render(&input(&base, &exps, 2)).unwrap();
    assert!(!whole.contains("**Plateau:**"));
    assert!(limit(&whole).contains("| 201 |"), "{}", limit(&whole));
}

/// A run that recorded a recent self-test (`environment.selftest`) rests on the bench's own
/// measured timing error: the record states it in one line naming the runs, and lints.
#[test]
fn a_recorded_selftest_is_the_records_measurement_floor() {
    use infergate_model::selftest::{Figures, SelftestOutcome, SelftestRecord, Spread};
    let (mut base, mut exps) = runs();
    let spread = |p50, p99| Spread { p50, p99, min: 0.01, max: p99, n: 1000 };
    let floor = SelftestRecord {
        at: "2025-05-01T10:00:00Z".into(),
        environment_fingerprint: base.environment_fingerprint.clone(),
        concurrency: 100,
        tokens_per_s: 10_000.0,
        itl_ms: 10.0,
        requests: 1000,
        attempts: 1,
        load_avg_1m: Some(0.4),
        verdict: SelftestOutcome::WithinBounds,
        figures: Figures {
            ttft_error_ms: spread(0.1, 0.42),
            gap_error_ms: spread(0.01, 0.48),
            server_late_ms: spread(0.07, 0.2),
        },
    };
    let text = render(&input(&base, &exps, 2)).unwrap();
    assert!(!text.contains("Measurement floor"), "no self-test, no floor");
    base.environment.selftest = Some(floor.clone());
    exps[1].environment.selftest = Some(floor);
    let text = render(&input(&base, &exps, 2)).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("Measurement floor")).collect();
    assert_eq!(
        lines,
        vec![
            "> Measurement floor of Baseline, Exp-2: self-test of 2025-05-01T10:00:00Z at \
             concurrency 100, 10000 tokens/s: the bench's own TTFT error p50 0.100 ms p99 0.420 \
             ms, inter-token gap error p50 0.010 ms p99 0.480 ms (server lateness p99 0.200 ms; \
             within the known-answer bounds)."
        ]
    );
    let path = std::path::PathBuf::from("docs/adr/0003-enable-chunked-prefill.md");
    let problems = lint_files(&[(path, text)]);
    assert!(
        problems.iter().all(|p| p.message.starts_with("template placeholder")),
        "{problems:#?}"
    );
}
