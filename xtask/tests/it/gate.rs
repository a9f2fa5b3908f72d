//! Gate verdicts at, just under and just over each limit for every comparator; missing metrics;
//! the printed report; intervals that straddle a limit (inconclusive, exit 3); trial sets.
//!
//! Most checks here judge two identical trials of one summary: their t interval has zero width,
//! so the verdict is the comparison of the value with the limit, which these tests are about.

use infergate_model::Summary;
use infergate_model::trials::{Trial, TrialSet};

use crate::support::redactions;

/// [`redactions`], and without the noise history's notes, which depend on whether the
/// temporary directory lies in a git repository.
fn gate_redactions(root: &std::path::Path) -> insta::Settings {
    let mut settings = redactions(root);
    settings.add_filter(r"note: noise history: .*\n", "");
    settings
}
use xtask::thresholds::{
    Action, CheckOutcome, Comparator, GateOptions, GateReport, Threshold, Thresholds,
    render_github, render_report,
};

/// Two identical trials of `s`: every estimate is the value, with a zero-width interval.
fn twice(s: &Summary) -> TrialSet {
    let trial = |i: u32| Trial { dir: format!("trial-0{i}").into(), summary: s.clone() };
    TrialSet::from_trials("set".into(), vec![trial(1), trial(2)])
}

/// The gate of [`twice`] `s`.
fn evaluate(s: &Summary, t: &Thresholds) -> GateReport {
    xtask::thresholds::evaluate(&twice(s), t, &GateOptions::default())
}

fn threshold(
    metric: &str,
    comparator: Comparator,
    limit: f64,
    unit: &str,
    action: Action,
    line: usize,
) -> Threshold {
    Threshold {
        metric: infergate_model::metric::MetricPath::named(metric),
        comparator,
        limit,
        unit: unit.into(),
        action,
        profile: None,
        scenario: Default::default(),
        environment: None,
        load: None,
        adr: 1,
        file: "docs/adr/0001-govern.md".into(),
        line,
    }
}

fn gate(ts: Vec<Threshold>) -> Thresholds {
    Thresholds { version: 1, thresholds: ts, budgets: vec![] }
}

#[test]
fn every_comparator_at_under_and_over_its_limit() {
    // (comparator, verdict just under, at, just over)
    let table = [
        (Comparator::Le, true, true, false),
        (Comparator::Lt, true, false, false),
        (Comparator::Ge, false, true, true),
        (Comparator::Gt, false, false, true),
        (Comparator::Eq, false, true, false),
    ];
    for (metric, limit, step, unit) in
        [("metrics.ttft_ms.p99", 200.0, 0.001, "ms"), ("goodput.ratio", 0.95, 1e-6, "ratio")]
    {
        for (cmp, under, at, over) in table {
            for (value, expect) in [(limit - step, under), (limit, at), (limit + step, over)] {
                let mut s = crate::support::summary(
                    "run-1",
                    180.0,
                    20.0,
                    0.97,
                    crate::support::engine_params(true, 2048),
                );
                match metric {
                    "goodput.ratio" => s.goodput.ratio = Some(value),
                    _ => s.metrics.ttft_ms.as_mut().unwrap().p99 = value,
                }
                for action in [Action::Block, Action::Warn] {
                    let report =
                        evaluate(&s, &gate(vec![threshold(metric, cmp, limit, unit, action, 7)]));
                    let check = &report.checks[0];
                    assert_eq!(check.measured, Some(value));
                    let want = if expect { CheckOutcome::PASS } else { CheckOutcome::FAIL };
                    assert_eq!(check.verdict, want, "{metric} = {value} {cmp} {limit}");
                    // Only a failed block threshold fails the gate.
                    assert_eq!(
                        report.passed(),
                        expect || action == Action::Warn,
                        "{metric} {cmp} {action}"
                    );
                    assert_eq!(report.warnings(), usize::from(!expect && action == Action::Warn));
                    assert_eq!(report.status().code(), if report.passed() { 0 } else { 1 });
                }
            }
        }
    }
}

#[test]
fn a_metric_the_run_lacks_fails() {
    let mut s = crate::support::summary(
        "run-1",
        180.0,
        20.0,
        0.97,
        crate::support::engine_params(true, 2048),
    );
    s.server = None;
    s.cost.per_1m_output_tokens = None;
    let t = gate(vec![
        threshold("server.kv_fragmentation", Comparator::Le, 0.1, "ratio", Action::Block, 3),
        threshold("cost.per_1m_output_tokens", Comparator::Le, 1.0, "currency", Action::Warn, 4),
    ]);
    let report = evaluate(&s, &t);
    assert_eq!(report.checks[0].verdict, CheckOutcome::Missing);
    assert_eq!(report.checks[1].verdict, CheckOutcome::Missing);
    assert!(!report.passed());
    assert_eq!((report.blocking_failures(), report.warnings()), (1, 1));
    // A run with no requests has no error rate either.
    s.requests.total = 0;
    let report = evaluate(
        &s,
        &gate(vec![threshold("error_rate", Comparator::Le, 0.01, "ratio", Action::Block, 5)]),
    );
    assert_eq!(report.checks[0].verdict, CheckOutcome::Missing);
}

/// An interrupted run measured part of its planned load: whatever its partial numbers, it does
/// not pass a gate (exit 1), and the report and the annotations say why.
#[test]
fn an_interrupted_run_never_passes_a_gate() {
    let mut s = crate::support::summary(
        "run-i",
        180.0,
        20.0,
        0.97,
        crate::support::engine_params(true, 2048),
    );
    let t =
        gate(vec![threshold("metrics.ttft_ms.p99", Comparator::Le, 500.0, "ms", Action::Block, 3)]);
    assert!(evaluate(&s, &t).passed(), "the complete run passes");
    s.status = infergate_model::summary::RunStatus::Interrupted;
    let report = evaluate(&s, &t);
    assert_eq!(report.checks[0].verdict, CheckOutcome::PASS, "its number is within the limit");
    assert!(!report.passed());
    assert_eq!(report.status(), xtask::exit::Status::PolicyViolated);
    // "blocking: the run was interrupted", "gate FAILED" and its annotation.
    let text = xtask::thresholds::render::render_report(&report, true);
    insta::assert_snapshot!("gate_report_interrupted", text);
    // With no threshold to check there is nothing to fail.
    assert!(evaluate(&s, &gate(vec![])).passed());
}

#[test]
fn the_report_and_annotations() {
    let mut s = crate::support::summary(
        "run-7",
        250.0,
        20.0,
        0.97,
        crate::support::engine_params(true, 2048),
    );
    s.server = None;
    s.simulated = true;
    let t = gate(vec![
        threshold("metrics.ttft_ms.p99", Comparator::Le, 201.0, "ms", Action::Block, 40),
        threshold("goodput.ratio", Comparator::Ge, 0.9, "ratio", Action::Block, 41),
        threshold("metrics.itl_jitter", Comparator::Le, 0.1, "ratio", Action::Warn, 42),
        threshold("server.kv_fragmentation", Comparator::Le, 0.05, "ratio", Action::Warn, 43),
    ]);
    let report = evaluate(&s, &t);
    insta::assert_snapshot!("gate_report", render_report(&report, true));
    let gh = render_github(&report);
    assert_eq!(gh.lines().count(), 3);
    assert!(gh.starts_with("::error file=docs/adr/0001-govern.md,line=40,title=gate%3A metrics.ttft_ms.p99::metrics.ttft_ms.p99 = 250 ms breaks <= 201 ms"), "{gh}");
    let all_pass = evaluate(
        &crate::support::summary("run-8", 100.0, 10.0, 0.99, serde_json::json!({})),
        &gate(t.thresholds[..2].to_vec()),
    );
    insta::assert_snapshot!("gate_report_pass", render_report(&all_pass, true));
}

/// Thresholds gate the runs of the scenario their record measured: a record of profile
/// `llama-cpp` does not judge a run of profile `default`, and a run no threshold applies to,
/// while other profiles have some, fails.
#[test]
fn thresholds_apply_to_the_profile_their_record_measured() {
    let s = crate::support::summary(
        "run-1",
        180.0,
        20.0,
        0.97,
        crate::support::engine_params(true, 2048),
    );
    assert_eq!(s.profile, "default");
    let scoped = |profile: Option<&str>, limit: f64| Threshold {
        profile: profile.map(str::to_string),
        ..threshold("metrics.ttft_ms.p99", Comparator::Le, limit, "ms", Action::Block, 9)
    };
    // Another profile's tight limit does not apply; this profile's and unscoped ones do.
    let report = evaluate(
        &s,
        &gate(vec![
            scoped(Some("llama-cpp"), 1.0),
            scoped(Some("default"), 200.0),
            scoped(None, 190.0),
        ]),
    );
    assert_eq!(report.checks.len(), 2);
    assert!(report.passed(), "{}", render_report(&report, false));
    assert_eq!(report.other_profiles, vec!["llama-cpp".to_string()]);
    let text = render_report(&report, false);
    assert!(text.contains("profile `default`") && text.contains("not applied"), "{text}");
    // Only other profiles' thresholds: nothing vouches for this run.
    let report = evaluate(&s, &gate(vec![scoped(Some("llama-cpp"), 1000.0)]));
    assert!(report.checks.is_empty() && report.ungoverned());
    assert!(!report.passed());
    assert_eq!(report.status().code(), 1);
    let text = render_report(&report, false);
    assert!(text.contains("no accepted record sets thresholds for profile `default`"), "{text}");
    assert!(text.contains("`llama-cpp`"), "{text}");
    assert!(render_report(&report, true).contains("::error title=gate%3A no thresholds"));
    assert!(
        render_github(&report)
            .starts_with("::error title=gate%3A no thresholds for this profile::"),
        "{}",
        render_github(&report)
    );
}

#[test]
fn a_run_of_another_scenario_is_named_and_not_passed() {
    // Thresholds from a sweep's knee at concurrency 32, checked on a run at concurrency 64 of
    // the same profile: the limits hold, but the run is not the scenario they were set for.
    let s = crate::support::summary(
        "run-64",
        180.0,
        20.0,
        0.97,
        crate::support::engine_params(true, 2048),
    );
    assert_eq!(s.config.profile().unwrap().load.concurrency, 64);
    let at = |concurrency: i64, action: Action| {
        let mut t = threshold("metrics.ttft_ms.p99", Comparator::Le, 200.0, "ms", action, 9);
        t.scenario.insert(
            infergate_model::config::ConfigKey::literal("load.concurrency"),
            toml::Value::Integer(concurrency),
        );
        t.scenario.insert(
            infergate_model::config::ConfigKey::literal("load.mode"),
            toml::Value::String("closed".into()),
        );
        t
    };
    let report = evaluate(&s, &gate(vec![at(32, Action::Block)]));
    assert_eq!(report.checks[0].verdict, CheckOutcome::OtherScenario);
    assert_eq!(report.checks[0].scenario_diffs, ["load.concurrency 64 (set for 32)"]);
    assert!(!report.passed());
    // "FAIL (other scenario)", what differs from the record's scenario, and the annotation at
    // the record's line.
    insta::assert_snapshot!("gate_report_other_scenario", render_report(&report, true));
    // A warn threshold of another scenario warns; the same scenario is checked as usual.
    assert!(evaluate(&s, &gate(vec![at(32, Action::Warn)])).passed());
    let same = evaluate(&s, &gate(vec![at(64, Action::Block)]));
    assert_eq!(same.checks[0].verdict, CheckOutcome::PASS);
    // gate.toml carries the scenario and reads it back.
    let file = gate(vec![at(32, Action::Block)]);
    let text = xtask::thresholds::file::render_file(&file, "docs/adr");
    assert!(
        text.contains("scenario = { \"load.concurrency\" = 32, \"load.mode\" = \"closed\" }\n"),
        "{text}"
    );
    let back =
        xtask::thresholds::file::parse(&infergate_model::config::Source::new("gate.toml", text))
            .unwrap();
    assert_eq!(back, file);
}

/// gate.toml with one blocking TTFT p99 limit, scoped to `scenario` (TOML inline table items).
fn write_gate_file(root: &std::path::Path, limit_ms: f64, scenario: &str) {
    std::fs::create_dir_all(root.join("thresholds")).unwrap();
    let scenario =
        if scenario.is_empty() { String::new() } else { format!("scenario = {{ {scenario} }}\n") };
    let text = format!(
        "version = 1\n\n[[threshold]]\nmetric = \"metrics.ttft_ms.p99\"\ncomparator = \"<=\"\n\
         limit = {limit_ms:?}\nunit = \"ms\"\naction = \"block\"\n{scenario}adr = 3\n\
         file = \"docs/adr/0003-x.md\"\nline = 40\n"
    );
    std::fs::write(root.join("thresholds/gate.toml"), text).unwrap();
}

#[test]
fn a_comparison_directory_gates_every_strategy_and_fails_when_one_fails() {
    let dir = tempfile::tempdir().unwrap();
    let cmp = dir.path().join("cmp");
    let mut rows = Vec::new();
    for (strategy, ttft) in [("serial", 900.0), ("continuous", 150.0)] {
        let s = crate::support::summary(
            &format!("cmp-{strategy}"),
            ttft,
            20.0,
            0.97,
            crate::support::engine_params(true, 2048),
        );
        let run = cmp.join(strategy);
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("summary.json"), serde_json::to_string(&s).unwrap()).unwrap();
        // Every request at the run's TTFT: its request-bootstrap interval is that value.
        crate::support::write_records(&run, 100, &[ttft]);
        rows.push(serde_json::json!({"strategy": strategy, "batching": "-",
            "run_dir": format!("cmp/{strategy}"), "status": "complete", "ok": 80, "failed": 0}));
    }
    let comparison = serde_json::json!({"profile": "default",
        "engine_config": "configs/engine.toml", "rows": rows, "notes": []});
    std::fs::write(cmp.join("comparison.json"), comparison.to_string()).unwrap();
    // serial breaks the 500 ms limit: the comparison fails, naming it.
    write_gate_file(dir.path(), 500.0, "");
    let out = crate::support::xtask(dir.path(), &["gate", "cmp"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    // A report per strategy; the failure names serial (run cmp-serial) and not continuous.
    gate_redactions(dir.path())
        .bind(|| insta::assert_snapshot!("gate_comparison_one_fails", out.text()));
    // Both within the limit: passed.
    write_gate_file(dir.path(), 1000.0, "");
    let out = crate::support::xtask(dir.path(), &["gate", "cmp"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("gate passed for every run: strategy serial, strategy continuous"));
}

#[test]
fn a_sweep_directory_judges_the_record_s_scenario_and_reports_other_loads() {
    use infergate_model::sweep::{StageResult, SweepSpec, SweepSummary};
    let dir = tempfile::tempdir().unwrap();
    let sweep_dir = |name: &str, loads: &[f64]| {
        let sw = dir.path().join(name);
        let mut stages = Vec::new();
        for (i, &load) in loads.iter().enumerate() {
            let mut s = crate::support::summary(
                &format!("{name}-{i}"),
                150.0,
                20.0,
                0.97,
                crate::support::engine_params(true, 2048),
            );
            s.config.profile_mut().unwrap().load.concurrency = load as u32;
            let stage_dir = format!("stage-0{}-concurrency-{load}", i + 1);
            std::fs::create_dir_all(sw.join(&stage_dir)).unwrap();
            std::fs::write(
                sw.join(&stage_dir).join("summary.json"),
                serde_json::to_string(&s).unwrap(),
            )
            .unwrap();
            crate::support::write_records(&sw.join(&stage_dir), 100, &[150.0]);
            stages.push(StageResult::from_summary(i + 1, load, stage_dir, &s));
        }
        let values: Vec<String> = loads.iter().map(|l| l.to_string()).collect();
        let spec: SweepSpec = format!("concurrency={}", values.join(",")).parse().unwrap();
        let sweep =
            SweepSummary::new(name.into(), &spec, Default::default(), Default::default(), stages);
        infergate_model::sweep::write(&sw, &sweep).unwrap();
    };
    sweep_dir("sw", &[16.0, 32.0]);
    sweep_dir("low", &[16.0]);
    write_gate_file(dir.path(), 500.0, "\"load.concurrency\" = 32");
    // The stage at 16 is not the record's scenario (reported, not failed); the stage at 32 is
    // judged and passes.
    let out = crate::support::xtask(dir.path(), &["gate", "sw"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    // The stage at 16: "not this record's scenario", "load.concurrency 16 (set for 32)".
    gate_redactions(dir.path())
        .bind(|| insta::assert_snapshot!("gate_sweep_other_stage", out.text()));
    // The stage at 32 over the limit fails the sweep.
    write_gate_file(dir.path(), 100.0, "\"load.concurrency\" = 32");
    let out = crate::support::xtask(dir.path(), &["gate", "sw"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("stage 2/2 concurrency=32"), "{}", out.stderr);
    // No stage is the scenario: nothing vouches for it, a failure.
    write_gate_file(dir.path(), 500.0, "\"load.concurrency\" = 32");
    let out = crate::support::xtask(dir.path(), &["gate", "low"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("no stage of the sweep is the scenario of ADR-0003 metrics.ttft_ms.p99"),
        "{}",
        out.stderr
    );
    // A single run of another scenario stays a failure.
    let out = crate::support::xtask(dir.path(), &["gate", "low/stage-01-concurrency-16"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("FAIL (other scenario)"), "{}", out.stdout);
}

/// A trial set on disk: one trial per TTFT list, each a run directory with its records and
/// the summary computed from them; `busy` marks trials measured on a busy host.
fn write_set(dir: &std::path::Path, ttfts: &[&[f64]], busy: &[usize]) {
    use infergate_model::trials::{FORMAT_VERSION, TrialEntry, TrialsFile};
    let mut entries = Vec::new();
    for (i, ttft) in ttfts.iter().enumerate() {
        let name = format!("trial-{:02}", i + 1);
        let run = dir.join(&name);
        crate::support::write_records(&run, ttft.len() as u64, ttft);
        crate::support::write_hlog(&run);
        let mut s = crate::support::summary_of_records(&run, &format!("set-t{:02}", i + 1));
        if busy.contains(&(i + 1)) {
            s.environment.noise = Some(infergate_model::hostnoise::HostNoise {
                other_share: Some(0.6),
                busy: true,
                reasons: vec!["other processes used 60% of the CPU time".into()],
                ..Default::default()
            });
        }
        std::fs::write(run.join("summary.json"), serde_json::to_string(&s).unwrap()).unwrap();
        entries.push(TrialEntry {
            dir: name,
            run_id: s.run_id.clone(),
            status: s.status,
            requests: s.requests.total,
            ok: s.requests.ok,
            host_busy: busy.contains(&(i + 1)),
            headline: Default::default(),
        });
    }
    let index = TrialsFile {
        format_version: FORMAT_VERSION,
        run_id: "set".into(),
        profile: "default".into(),
        request: None,
        planned: ttfts.len() as u32,
        cooldown_s: 0.0,
        confidence: 0.95,
        trials: entries,
        metrics: Default::default(),
        notes: vec![],
        warmup: vec![],
        cold_start: None,
    };
    index.write(dir).unwrap();
}

/// TTFT mean of three trials: 180, 200 and 220 ms (each trial 100 requests at that TTFT). The t
/// interval is 200 ± 4.303 x 20 / sqrt(3) = [150.3, 249.7]: a limit inside it cannot be decided.
#[test]
fn a_trial_set_passes_fails_or_is_inconclusive_by_its_interval_and_exit_3_is_never_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (vec![180.0; 100], vec![200.0; 100], vec![220.0; 100]);
    write_set(&dir.path().join("set"), &[&a, &b, &c], &[]);
    let gate_at = |limit: f64| {
        std::fs::create_dir_all(dir.path().join("thresholds")).unwrap();
        let text = format!(
            "version = 1\n\n[[threshold]]\nmetric = \"metrics.ttft_ms.mean\"\ncomparator = \"<=\"\n\
             limit = {limit:?}\nunit = \"ms\"\naction = \"block\"\nadr = 3\n\
             file = \"docs/adr/0003-x.md\"\nline = 40\n"
        );
        std::fs::write(dir.path().join("thresholds/gate.toml"), text).unwrap();
        crate::support::xtask(dir.path(), &["gate", "set"])
    };
    let out = gate_at(260.0);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("200 ms [150.3"), "{}", out.stdout);
    // "gate: trial set set (3 trials)", "3 trials, 300 requests, t_interval".
    gate_redactions(dir.path()).bind(|| insta::assert_snapshot!("gate_trial_set_pass", out.text()));
    let out = gate_at(140.0);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("gate FAILED"), "{}", out.stdout);
    // 210 ms lies inside the interval: the data cannot decide.
    let out = gate_at(210.0);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    // "INCONCLUSIVE", the interval that "straddles <= 210 ms", and the count line.
    gate_redactions(dir.path())
        .bind(|| insta::assert_snapshot!("gate_trial_set_inconclusive", out.text()));
    // At 80% confidence the interval is 200 ± 1.886 x 11.55 = [178.2, 221.8]: still
    // inconclusive at 210, but 230 passes.
    let out = crate::support::xtask(dir.path(), &["gate", "set", "--confidence", "0.8"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    gate_at(230.0);
    let out = crate::support::xtask(dir.path(), &["gate", "set", "--confidence", "0.8"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let out = crate::support::xtask(dir.path(), &["gate", "set", "--confidence", "1.5"]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("within (0, 1)"), "{}", out.stderr);
    // A set without the request of its trials cannot be extended.
    let out = crate::support::xtask(
        dir.path(),
        &["bench", "trials", "set", "--until-decided", "--max-trials", "5"],
    );
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("does not record the request"), "{}", out.stderr);
}

/// A trial set that is not what its files say: a trial of another engine config swapped in is
/// refused (exit 2) naming the key; a deleted `requests.jsonl` or a trial cut short, and an
/// unlisted `trial-04`, make it incomplete (exit 1, named) whatever the verdicts; with
/// `trials.json` deleted the gate says so instead of asking for a summary.json.
#[test]
fn a_mixed_or_tampered_trial_set_is_refused_or_incomplete_naming_what() {
    let dir = tempfile::tempdir().unwrap();
    let set = dir.path().join("set");
    let t = vec![200.0; 100];
    write_set(&set, &[&t, &t, &t], &[]);
    std::fs::create_dir_all(dir.path().join("thresholds")).unwrap();
    let text = "version = 1\n\n[[threshold]]\nmetric = \"metrics.ttft_ms.mean\"\ncomparator = \"<=\"\n\
                limit = 1000.0\nunit = \"ms\"\naction = \"block\"\nadr = 3\n\
                file = \"docs/adr/0003-x.md\"\nline = 40\n";
    std::fs::write(dir.path().join("thresholds/gate.toml"), text).unwrap();
    let gate = || crate::support::xtask(dir.path(), &["gate", "set"]);
    let out = gate();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    // Trial 2 of another engine config.
    let path = set.join("trial-02/summary.json");
    let original = std::fs::read_to_string(&path).unwrap();
    let mut s: Summary = serde_json::from_str(&original).unwrap();
    s.engine.as_mut().unwrap().params["scheduler"]["max_num_seqs"] = 320.into();
    std::fs::write(&path, serde_json::to_string(&s).unwrap()).unwrap();
    let out = gate();
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("trial trial-02 of")
            && out.stderr.contains("engine config scheduler.max_num_seqs 320 against 256"),
        "{}",
        out.stderr
    );
    std::fs::write(&path, &original).unwrap();
    // Trial 3's records deleted, trial 1's cut in half.
    std::fs::remove_file(set.join("trial-03/requests.jsonl")).unwrap();
    let cut = set.join("trial-01/requests.jsonl");
    let text = std::fs::read_to_string(&cut).unwrap();
    let half: Vec<&str> = text.lines().take(50).collect();
    std::fs::write(&cut, half.join("\n") + "\n").unwrap();
    let out = gate();
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    // "is incomplete": trial-03 cannot read its requests.jsonl, trial-01's holds 50 measured.
    gate_redactions(dir.path())
        .bind(|| insta::assert_snapshot!("gate_trial_set_incomplete", out.text()));
    // An extra trial directory that trials.json does not list.
    let clean = dir.path().join("clean");
    write_set(&clean, &[&t, &t], &[]);
    copy_dir(&clean.join("trial-02"), &clean.join("trial-04"));
    let out = crate::support::xtask(dir.path(), &["gate", "clean"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("trial-04 is a trial directory trials.json does not list"),
        "{}",
        out.stderr
    );
    // trials.json deleted.
    std::fs::remove_file(clean.join("trials.json")).unwrap();
    let out = crate::support::xtask(dir.path(), &["gate", "clean"]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("holds trial directories (trial-01, trial-02, trial-04) but no trials.json"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("summary.json"), "{}", out.stderr);
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn a_busy_host_makes_the_gate_refuse_to_decide_naming_the_trial_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (vec![100.0; 100], vec![101.0; 100]);
    write_set(&dir.path().join("set"), &[&a, &b], &[2]);
    write_gate_file(dir.path(), 500.0, "");
    std::fs::write(
        dir.path().join("thresholds/gate.toml"),
        std::fs::read_to_string(dir.path().join("thresholds/gate.toml"))
            .unwrap()
            .replace("ttft_ms.p99", "ttft_ms.mean"),
    )
    .unwrap();
    // By default a set with a trial measured on a busy host is not decided: exit 3, naming it.
    let out = crate::support::xtask(dir.path(), &["gate", "set"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    // "the client host was busy during trial-02 (other processes used 60% ...", "decide
    // anyway: --allow-busy-host".
    gate_redactions(dir.path())
        .bind(|| insta::assert_snapshot!("gate_busy_host_undecided", out.text()));
    // --refuse-busy-host, the old spelling, is the default.
    let out = crate::support::xtask(dir.path(), &["gate", "set", "--refuse-busy-host"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    // --allow-busy-host decides, and says the host was busy.
    let out = crate::support::xtask(dir.path(), &["gate", "set", "--allow-busy-host"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("note: the client host was busy during trial-02"),
        "{}",
        out.stdout
    );
}

/// One run is a set of one: its interval is the request bootstrap of its own records (marked
/// as counting requests only); a P99 from fewer than 100 requests is marked UNDERSAMPLED; a
/// measured metric with no interval is inconclusive with the reason, an unmeasured one fails.
#[test]
fn a_single_run_is_decided_by_its_request_bootstrap_and_blank_estimates_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    // 50 requests, TTFT 100..=149 ms.
    let ttfts: Vec<f64> = (0..50).map(|i| 100.0 + i as f64).collect();
    crate::support::write_records(&run, 50, &ttfts);
    let mut s = crate::support::summary_of_records(&run, "run-1");
    s.server = Some(infergate_model::server_metrics::ServerSection {
        kv_fragmentation: Some(0.01),
        ..Default::default()
    });
    s.cost.per_request = None;
    std::fs::write(run.join("summary.json"), serde_json::to_string(&s).unwrap()).unwrap();
    let t = gate(vec![
        // The mean is 124.5 ms; its bootstrap interval is about ±4 ms.
        threshold("metrics.ttft_ms.mean", Comparator::Le, 200.0, "ms", Action::Block, 3),
        threshold("metrics.ttft_ms.mean", Comparator::Le, 125.0, "ms", Action::Block, 4),
        threshold("metrics.ttft_ms.p99", Comparator::Le, 1000.0, "ms", Action::Block, 5),
        threshold("server.kv_fragmentation", Comparator::Le, 0.05, "ratio", Action::Block, 6),
        threshold("cost.per_request", Comparator::Le, 1.0, "currency", Action::Warn, 7),
    ]);
    let set = TrialSet::load(&run).unwrap();
    let report = xtask::thresholds::evaluate(&set, &t, &GateOptions::default());
    let verdicts: Vec<CheckOutcome> = report.checks.iter().map(|c| c.verdict).collect();
    assert_eq!(
        verdicts,
        [
            CheckOutcome::PASS,
            CheckOutcome::INCONCLUSIVE,
            CheckOutcome::PASS,
            CheckOutcome::INCONCLUSIVE,
            CheckOutcome::Missing
        ],
        "{}",
        render_report(&report, false)
    );
    let mean = report.checks[0].estimate.clone().unwrap();
    assert_eq!(mean.method, infergate_model::stats::Method::RequestBootstrap);
    assert!(mean.lo < 124.5 && mean.hi > 124.5 && mean.hi - mean.lo < 12.0, "{mean}");
    assert!(report.checks[2].estimate.as_ref().unwrap().undersampled);
    let why = report.checks[3].reason.clone().unwrap();
    assert!(why.contains("does not come from the request records"), "{why}");
    // The missing metric is a warn threshold's; the undecided blocking ones leave the gate
    // inconclusive.
    assert_eq!(report.status(), xtask::exit::Status::Inconclusive);
    // "1 trial, 50 requests, request_bootstrap (requests only), UNDERSAMPLED", the note that
    // one trial's intervals count request-to-request variance only, and why
    // server.kv_fragmentation cannot be decided.
    insta::assert_snapshot!("gate_report_single_run", render_report(&report, false));
}

/// The bench settings of every run of the environment-key test: a short load, an SLO every
/// simulated GPU meets (so no record is flagged for a missed SLO).
const SHORT_RUN: [&str; 8] = [
    "--set",
    "workload.repeats=5",
    "--set",
    "load.warmup_requests=4",
    "--set",
    "slo.ttft_ms=60000",
    "--set",
    "slo.tpot_ms=60000",
];

/// `bench -q --out runs/NAME` on the simulator, with the engine config `engine_config`.
fn bench_on(root: &std::path::Path, name: &str, engine_config: &str) {
    let out = format!("runs/{name}");
    let config = format!("sim.engine_config={engine_config}");
    let mut args = vec!["bench", "-q", "--out", &out, "--set", &config];
    args.extend(SHORT_RUN);
    let o = crate::support::xtask(root, &args);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
}

/// `adr new TITLE --baseline runs/RUN` (its thresholds with 50% headroom), the placeholders
/// filled in, accepted, gate.toml regenerated.
fn record_of(root: &std::path::Path, n: u32, title: &str, run: &str) {
    let baseline = format!("runs/{run}");
    let o = crate::support::xtask(
        root,
        &["adr", "new", title, "--baseline", &baseline, "--headroom", "50%", "--deciders", "Ops"],
    );
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let path = std::fs::read_dir(root.join("docs/adr"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("{n:04}-")))
        .expect("adr new wrote the record");
    let text = std::fs::read_to_string(&path).unwrap();
    let filled: Vec<&str> = text
        .lines()
        .map(
            |l| if l.starts_with('<') && l.ends_with('>') { "Written by the deciders." } else { l },
        )
        .collect();
    std::fs::write(&path, filled.join("\n") + "\n").unwrap();
    let o = crate::support::xtask(root, &["adr", "accept", &n.to_string()]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let o = crate::support::xtask(root, &["adr", "thresholds"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
}

/// Thresholds follow the hardware: real simulator runs on an H100 and on an A100 (the engine
/// config's `[device]`). A record keyed to the H100 gates the H100 run and leaves the A100 run
/// not decided (exit 5, the record command named); a second record for the A100 stands beside
/// it without a conflict, each gating only its own GPU's runs.
#[test]
fn a_record_keyed_to_one_gpu_gates_only_that_gpu_and_two_gpus_records_coexist() {
    let r = crate::support::copy_of_configs();
    let root = r.path();
    let h100 = std::fs::read_to_string(root.join("configs/engine.toml")).unwrap();
    assert!(h100.contains("name = \"H100-SXM-80GB\""), "the default engine config is an H100's");
    let a100 = h100.replace("name = \"H100-SXM-80GB\"", "name = \"A100-80GB\"");
    std::fs::write(root.join("configs/engine-a100.toml"), a100).unwrap();
    bench_on(root, "h100", "configs/engine.toml");
    bench_on(root, "a100", "configs/engine-a100.toml");
    let key = |gpu: &str| {
        format!(
            "gpu={gpu} x1; engine=infergate-sim; model=meta-llama/Llama-3.1-8B-Instruct; dtype=bfloat16"
        )
    };
    let gate = |run: &str| {
        crate::support::xtask(root, &["gate", "--allow-busy-host", "--no-history", run])
    };

    record_of(root, 1, "H100 limits", "h100");
    let record = std::fs::read_to_string(crate::support::new_record(root)).unwrap();
    assert!(record.contains(&format!("| `{}` |", key("H100-SXM-80GB"))), "{record}");
    let gate_toml = std::fs::read_to_string(root.join("thresholds/gate.toml")).unwrap();
    assert!(gate_toml.contains(&format!("environment = \"{}\"", key("H100-SXM-80GB"))));

    // The A100 run: no record for its environment, named, with the command to write one.
    let o = gate("runs/a100");
    assert_eq!(o.code, 5, "{}{}", o.stdout, o.stderr);
    assert_eq!(xtask::exit::NO_RECORD.code, 5);
    assert!(o.stdout.contains("no record for this environment"), "{}", o.stdout);
    assert!(o.stdout.contains(&format!("measured `{}`", key("A100-80GB"))), "{}", o.stdout);
    assert!(o.stdout.contains(&format!("for `{}` only", key("H100-SXM-80GB"))), "{}", o.stdout);
    assert!(
        o.stdout.contains("cargo xtask adr new 'Gate profile default on A100-80GB x1' --baseline"),
        "{}",
        o.stdout
    );
    assert!(!o.stdout.contains("ADR-0001 ("), "no H100 limit judged the A100 run: {}", o.stdout);
    assert!(!o.stdout.contains("gate passed"), "{}", o.stdout);
    // `bench --gate` selects the same way: a new A100 run is not decided either.
    let mut args = vec!["bench", "-q", "--gate", "--allow-busy-host", "--out", "runs/a100-gated"];
    args.extend(["--set", "sim.engine_config=configs/engine-a100.toml"]);
    args.extend(SHORT_RUN);
    let o = crate::support::xtask(root, &args);
    assert_eq!(o.code, 5, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("gate NOT DECIDED (no record for this environment)"), "{}", o.stdout);
    // The H100 run: gated by the H100 record, and it holds.
    let o = gate("runs/h100");
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("| ADR-0001 (docs/adr/0001-h100-limits.md:"), "{}", o.stdout);
    assert!(o.stdout.contains(&format!("environment: {}", key("H100-SXM-80GB"))), "{}", o.stdout);

    // A second live record for the same profile and metrics, keyed to the A100: accepted
    // without a conflict, both in gate.toml, each gating its own GPU only.
    record_of(root, 2, "A100 limits", "a100");
    let o = crate::support::xtask(root, &["adr", "thresholds", "--check"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let o = crate::support::xtask(root, &["adr", "lint"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let gate_toml = std::fs::read_to_string(root.join("thresholds/gate.toml")).unwrap();
    for gpu in ["H100-SXM-80GB", "A100-80GB"] {
        assert!(gate_toml.contains(&format!("environment = \"{}\"", key(gpu))), "{gate_toml}");
    }
    let o = crate::support::xtask(root, &["adr", "list"]);
    assert!(o.stdout.contains(&key("H100-SXM-80GB")) && o.stdout.contains(&key("A100-80GB")));
    for (run, mine, other) in
        [("runs/a100", "0002-a100", "0001-h100"), ("runs/h100", "0001-h100", "0002-a100")]
    {
        let o = gate(run);
        assert_eq!(o.code, 0, "{run}: {}{}", o.stdout, o.stderr);
        assert!(o.stdout.contains(&format!("(docs/adr/{mine}-limits.md:")), "{}", o.stdout);
        assert!(!o.stdout.contains(&format!("(docs/adr/{other}-limits.md:")), "{}", o.stdout);
        assert!(o.stdout.contains("not applied: the thresholds set for"), "{}", o.stdout);
    }
}

/// `--json FILE`: the verdicts the console shows, with the exit status, as a typed artifact
/// (`gate.json`, the MCP `gate` tool's result); refused beside `--ab`, which writes `ab.json`.
#[test]
fn the_verdicts_are_written_as_json_with_the_exit_status() {
    use xtask::thresholds::CheckOutcome;
    use xtask::thresholds::report_file::GateFile;
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (vec![180.0; 100], vec![200.0; 100], vec![220.0; 100]);
    write_set(&dir.path().join("set"), &[&a, &b, &c], &[]);
    std::fs::create_dir_all(dir.path().join("thresholds")).unwrap();
    let cases = [
        (260.0, 0, "success", CheckOutcome::PASS),
        (140.0, 1, "policy-violated", CheckOutcome::FAIL),
        (210.0, 3, "inconclusive", CheckOutcome::INCONCLUSIVE),
    ];
    for (limit, code, status, verdict) in cases {
        let text = format!(
            "version = 1\n\n[[threshold]]\nmetric = \"metrics.ttft_ms.mean\"\ncomparator = \"<=\"\n\
             limit = {limit:?}\nunit = \"ms\"\naction = \"block\"\nadr = 3\n\
             file = \"docs/adr/0003-x.md\"\nline = 40\n"
        );
        std::fs::write(dir.path().join("thresholds/gate.toml"), text).unwrap();
        let out =
            crate::support::xtask(dir.path(), &["gate", "set", "--json", "target/g/gate.json"]);
        assert_eq!(out.code, code, "{}{}", out.stdout, out.stderr);
        let file: GateFile =
            infergate_model::artifact::read(&dir.path().join("target/g/gate.json")).unwrap();
        assert_eq!((i32::from(file.exit_code), file.status.as_str()), (code, status));
        assert_eq!(file.runs.len(), 1);
        assert!(file.runs[0].label.is_none() && file.problems.is_empty());
        let check = &file.runs[0].report.checks[0];
        assert_eq!((check.verdict, check.threshold.limit), (verdict, limit));
        assert_eq!(check.estimate.as_ref().map(|e| e.trials), Some(3), "three trials");
    }
    let out = crate::support::xtask(dir.path(), &["bench", "ab", "--json", "x.json"]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("--json"), "{}", out.stderr);
}
