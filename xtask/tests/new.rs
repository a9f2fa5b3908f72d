//! `adr new` from summaries built in code: the generated record (snapshot) and what lint says.

mod common;

use bench::summary::metric_def;
use chrono::NaiveDate;
use xtask::adr::lint::lint_files;
use xtask::adr::new::{MATRIX, NewAdr, propose_limit, render};
use xtask::adr::parse_adr;

fn runs() -> (bench::Summary, Vec<bench::Summary>) {
    let base =
        common::summary("20250501-base", 420.5, 31.25, 0.81, common::engine_params(false, 8192));
    let mut exp1 =
        common::summary("20250501-exp1", 260.0, 33.0, 0.9, common::engine_params(true, 8192));
    exp1.simulated = true;
    exp1.notes.push("token counts from content events (no usage reported)".into());
    let mut exp2 =
        common::summary("20250501-exp2", 182.345, 28.1, 0.97, common::engine_params(true, 2048));
    exp2.server = None; // KV fragmentation not scraped: stays blank, no threshold
    (base, vec![exp1, exp2])
}

fn input<'a>(base: &'a bench::Summary, exps: &'a [bench::Summary], choose: usize) -> NewAdr<'a> {
    NewAdr {
        number: 3,
        title: "Enable chunked prefill with 2k batched tokens",
        date: NaiveDate::from_ymd_opt(2025, 5, 2).unwrap(),
        deciders: Some("Platform team"),
        headroom: 0.10,
        baseline: base,
        experiments: exps,
        choose,
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

    // The decision lines are the chosen experiment's changes, with TOML values.
    let decided: Vec<String> = adr.decisions.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        decided,
        vec![
            "configs/engine.toml: scheduler.enable_chunked_prefill = true",
            "configs/engine.toml: scheduler.max_num_batched_tokens = 2048",
        ]
    );
    // Thresholds: every measured matrix metric of Exp-2, from its value with the headroom;
    // KV fragmentation was not measured, so it has none.
    let chosen = &exps[1];
    let mut want = Vec::new();
    for (_, metric, action) in MATRIX {
        if let Some(v) = chosen.metric(metric) {
            let (cmp, limit) = propose_limit(v, metric_def(metric).unwrap().better, 0.10);
            want.push((metric.to_string(), cmp, limit, action));
        }
    }
    let got: Vec<_> = adr
        .thresholds
        .iter()
        .map(|t| (t.metric.clone(), t.comparator, t.limit, t.action))
        .collect();
    assert_eq!(got, want);
    assert!(got.iter().all(|(m, ..)| m != "server.kv_fragmentation"));
    assert!(
        text.contains("| Exp-2 | 182.3 | 28.1 | 0.123 | 0.97 | 1344 | — | 0.5167 | chosen |"),
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
    assert!(text.contains("Keep the baseline configuration"));
    assert!(text.contains("this record keeps the baseline configuration"));
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
        render(&input(&base, &exps, 3)).unwrap_err().contains("--choose 3 names no experiment")
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
