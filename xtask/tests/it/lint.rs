//! Lint fixtures: a good pair of records, then one broken variant per rule, each reported at
//! the right line.

use std::path::PathBuf;

use xtask::adr::lint::lint_files;
use xtask::adr::{AdrStatus, Decided, decision_lines, parse_adr};

const NEW: &str = "docs/adr/0002-enable-chunked-prefill.md";
const OLD: &str = "docs/adr/0001-use-defaults.md";

const GOOD: &str = "\
# ADR-0002: Enable chunked prefill

- Status: Accepted
- Date: 2025-05-01
- Deciders: Platform team

## Context

Long prompts block decode batches at concurrency 64.

## Metrics matrix

| Config | TTFT P99 (ms) | Conclusion |
|---|---:|---|
| Baseline | 420 | reference |
| Exp-1 | 180 | chosen |

## Decision

- configs/engine.toml: scheduler.enable_chunked_prefill = true
- configs/engine.toml: scheduler.max_num_batched_tokens = 2048

## CI gate thresholds

| Metric | Comparator | Limit | Unit | Action |
|---|---|---|---|---|
| `metrics.ttft_ms.p99` | <= | 200 | ms | block |
| `goodput.ratio` | >= | 95 | % | block |
| `metrics.itl_jitter` | <= | 0.15 | ratio | warn |

## Rollback conditions

TTFT P99 above 200 ms on a gate run: restore the previous values.

## Consequences

Prefill is split into chunks; short requests no longer wait behind long ones.

## Links

- Supersedes [ADR-0001](0001-use-defaults.md)
";

const OLD_TEXT: &str = "\
# ADR-0001: Use the defaults

- Status: Superseded by 0002
- Date: 2025-01-10
- Deciders: Platform team

## Context

First record.

## Metrics matrix

| Config | TTFT P99 (ms) | Conclusion |
|---|---:|---|
| Baseline | 420 | reference |

## Decision

- configs/engine.toml: scheduler.enable_chunked_prefill = false

## CI gate thresholds

| Metric | Comparator | Limit | Unit | Action |
|---|---|---|---|---|
| `metrics.ttft_ms.p99` | <= | 450 | ms | block |

## Rollback conditions

TTFT P99 above 450 ms.

## Consequences

None worth noting.

## Links

- Superseded by [ADR-0002](0002-enable-chunked-prefill.md)
";

fn files(new_text: &str) -> Vec<(PathBuf, String)> {
    vec![(PathBuf::from(OLD), OLD_TEXT.to_string()), (PathBuf::from(NEW), new_text.to_string())]
}

/// GOOD with line `line` (1-based) replaced.
fn with_line(line: usize, text: &str) -> String {
    let mut lines: Vec<&str> = GOOD.lines().collect();
    lines[line - 1] = text;
    lines.join("\n") + "\n"
}

#[test]
fn the_good_records_have_no_problems() {
    assert_eq!(lint_files(&files(GOOD)), vec![]);
    let adr = parse_adr(NEW.as_ref(), GOOD);
    assert_eq!(adr.number, Some(2));
    assert_eq!(adr.title(), Some("Enable chunked prefill"));
    assert_eq!(adr.status_value(), Some(AdrStatus::Accepted));
    let rows: Vec<(&str, f64, usize)> =
        adr.thresholds.iter().map(|t| (t.metric.as_str(), t.limit, t.line)).collect();
    assert_eq!(
        rows,
        vec![
            ("metrics.ttft_ms.p99", 200.0, 27),
            ("goodput.ratio", 0.95, 28),
            ("metrics.itl_jitter", 0.15, 29)
        ]
    );
}

#[test]
fn rollback_conditions_are_read_with_their_line_window_and_action() {
    let text = with_line(
        33,
        "- `metrics.ttft_ms.p99` above 0.2 s for 90s: roll back (measured 180 in Exp-1)\n\
         - `metrics.itl_jitter` > 0.2 for 1h: investigate\n\
         Prose around the conditions stays prose.",
    );
    assert_eq!(lint_files(&files(&text)), vec![]);
    let adr = parse_adr(NEW.as_ref(), &text);
    let got: Vec<(&str, f64, u64, &str, usize)> = adr
        .rollback
        .iter()
        .map(|c| (c.metric.as_str(), c.limit, c.window.seconds, c.action.as_str(), c.line))
        .collect();
    assert_eq!(
        got,
        vec![
            ("metrics.ttft_ms.p99", 200.0, 90, "roll back", 33),
            ("metrics.itl_jitter", 0.2, 3600, "investigate", 34)
        ]
    );
    // The same metric and action twice: the second is reported, naming the first.
    let twice = with_line(
        33,
        "- `metrics.ttft_ms.p99` above 200 ms for 5m: roll back\n\
         - `metrics.ttft_ms.p99` above 250 ms for 1m: roll back",
    );
    let problems: Vec<String> = lint_files(&files(&twice)).iter().map(|p| p.to_string()).collect();
    assert_eq!(
        problems,
        vec![format!(
            "{NEW}:34: `metrics.ttft_ms.p99` already has a `roll back` rollback condition at line 33"
        )]
    );
}

#[test]
fn decision_lines_come_with_status_and_lines() {
    let set = decision_lines(NEW.as_ref(), GOOD).unwrap();
    assert_eq!(set.number, Some(2));
    assert_eq!(set.status, AdrStatus::Accepted);
    let got: Vec<(String, String, String, usize)> = set
        .lines
        .iter()
        .map(|d| (d.file.clone(), d.key.to_string(), d.value.to_string(), d.line))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "configs/engine.toml".into(),
                "scheduler.enable_chunked_prefill".into(),
                "= true".into(),
                20
            ),
            (
                "configs/engine.toml".into(),
                "scheduler.max_num_batched_tokens".into(),
                "= 2048".into(),
                21
            ),
        ]
    );
    assert_eq!(
        set.lines[0].to_string(),
        "configs/engine.toml: scheduler.enable_chunked_prefill = true"
    );
    // Backticks around a line are allowed; a malformed line is an error at its line.
    let set = decision_lines(
        NEW.as_ref(),
        &with_line(21, "- `configs/engine.toml: scheduler.policy = \"fcfs\"`"),
    )
    .unwrap();
    assert_eq!(set.lines[1].value, Decided::Set(toml::Value::String("fcfs".into())));
    // A key the record takes out of the file.
    let set = decision_lines(
        NEW.as_ref(),
        &with_line(21, "- configs/engine.toml: scheduler.max_num_batched_tokens removed"),
    )
    .unwrap();
    assert_eq!(set.lines[1].value, Decided::Removed);
    assert_eq!(
        set.lines[1].to_string(),
        "configs/engine.toml: scheduler.max_num_batched_tokens removed"
    );
    let err = decision_lines(
        NEW.as_ref(),
        &with_line(21, "- configs/engine.toml: scheduler.max_num_batched_tokens deleted"),
    )
    .unwrap_err();
    assert_eq!((err.len(), err[0].line), (1, 21));
    assert!(err[0].message.contains("section.key removed"), "{}", err[0]);
    let err = decision_lines(
        NEW.as_ref(),
        &with_line(21, "- configs/engine.toml: scheduler.policy = fcfs"),
    )
    .unwrap_err();
    assert_eq!((err.len(), err[0].line), (1, 21));
    let err = decision_lines(NEW.as_ref(), &with_line(3, "- Status: Maybe")).unwrap_err();
    assert_eq!((err.len(), err[0].line), (1, 3));
    assert!(err[0].message.contains("unknown status"), "{}", err[0]);
    // No status and a bad decision line: both are reported.
    let text = with_line(3, "").replace("= 2048", "= ?");
    let err = decision_lines(NEW.as_ref(), &text).unwrap_err();
    let got: Vec<(usize, bool)> =
        err.iter().map(|p| (p.line, p.message.starts_with("no status"))).collect();
    assert_eq!(got, vec![(1, true), (21, false)], "{err:#?}");
}

#[test]
fn each_broken_record_is_reported_at_its_line() {
    // (what breaks, line replaced, new text, path of the problem, line, message fragment)
    let cases: &[(&str, usize, &str, &str, usize, &str)] = &[
        ("unknown status", 3, "- Status: Acepted", NEW, 3, "unknown status `Acepted`"),
        ("non-ISO date", 4, "- Date: 01.05.2025", NEW, 4, "not an ISO-8601 date"),
        ("impossible date", 4, "- Date: 2025-02-30", NEW, 4, "not an ISO-8601 date"),
        ("no deciders", 5, "", NEW, 1, "no deciders"),
        ("empty deciders", 5, "- Deciders:", NEW, 5, "deciders are empty"),
        ("second H1", 9, "# Another title", NEW, 9, "second H1"),
        ("title number", 1, "# ADR-0003: Enable chunked prefill", NEW, 1, "title says ADR-0003"),
        ("empty section", 37, "", NEW, 35, "section `Consequences` is empty"),
        (
            "missing section",
            31,
            "## Rollback plan",
            NEW,
            1,
            "missing section `## Rollback conditions`",
        ),
        (
            "angle placeholder",
            9,
            "<describe the scenario>",
            NEW,
            9,
            "placeholder `<describe the scenario>`",
        ),
        ("blank placeholder", 33, "TTFT P99 above __ ms.", NEW, 33, "placeholder `__`"),
        ("TODO", 37, "TODO", NEW, 37, "placeholder `TODO`"),
        (
            "decision without colon",
            21,
            "- configs/engine.toml scheduler.x = 1",
            NEW,
            21,
            "missing `: `",
        ),
        (
            "decision value not TOML",
            21,
            "- configs/engine.toml: scheduler.policy = fcfs",
            NEW,
            21,
            "not a TOML value",
        ),
        (
            "decision outside configs",
            21,
            "- configs/../engine.toml: a.b = 1",
            NEW,
            21,
            "is not a path of a file of the repository",
        ),
        (
            "decision twice",
            21,
            "- configs/engine.toml: scheduler.enable_chunked_prefill = false",
            NEW,
            21,
            "already decided at line 20",
        ),
        (
            "decided and removed",
            21,
            "- configs/engine.toml: scheduler.enable_chunked_prefill removed",
            NEW,
            21,
            "already decided at line 20",
        ),
        (
            "removal with a value",
            21,
            "- configs/engine.toml: scheduler.max_num_batched_tokens removed = 1",
            NEW,
            21,
            "is not a dotted key",
        ),
        (
            "unknown metric",
            27,
            "| `metrics.ttft.p99` | <= | 200 | ms | block |",
            NEW,
            27,
            "did you mean `metrics.ttft_ms.p99`",
        ),
        (
            "bad comparator",
            28,
            "| `goodput.ratio` | => | 95 | % | block |",
            NEW,
            28,
            "unknown comparator `=>`",
        ),
        (
            "unit of another metric",
            27,
            "| `metrics.ttft_ms.p99` | <= | 200 | % | block |",
            NEW,
            27,
            "unit `%` does not fit",
        ),
        (
            "limit with unit",
            27,
            "| `metrics.ttft_ms.p99` | <= | 200ms | ms | block |",
            NEW,
            27,
            "limit `200ms` is not a number",
        ),
        (
            "a limit that overflows in its unit",
            27,
            "| `metrics.ttft_ms.p99` | <= | 1e308 | s | block |",
            NEW,
            27,
            "limit `1e308 s` is inf in ms, the unit of the metric: not a finite number",
        ),
        (
            "bad action",
            29,
            "| `metrics.itl_jitter` | <= | 0.15 | ratio | stop |",
            NEW,
            29,
            "unknown action `stop`",
        ),
        (
            "column missing",
            25,
            "| Metric | Comparator | Limit | Unit | Severity |",
            NEW,
            25,
            "lacks column(s) `action`",
        ),
        (
            "metric twice",
            29,
            "| `goodput.ratio` | >= | 0.9 | ratio | block |",
            NEW,
            29,
            "already has a `block` threshold at line 28",
        ),
        (
            "rollback condition without a window",
            33,
            "- `metrics.ttft_ms.p99` above 200 ms: roll back",
            NEW,
            33,
            "no window (`for 5m`)",
        ),
        (
            "rollback condition with a spelled-out window",
            33,
            "- `metrics.ttft_ms.p99` above 200 ms for 5 minutes: roll back",
            NEW,
            33,
            "`for` takes one duration (`5m`)",
        ),
        (
            "rollback condition on the better side",
            33,
            "- `metrics.ttft_ms.p99` below 200 ms for 5m: roll back",
            NEW,
            33,
            "is better lower: a rollback condition is on its worse side (above, >, >=)",
        ),
        (
            "rollback condition with an unknown action",
            33,
            "- `metrics.ttft_ms.p99` above 200 ms for 5m: page someone",
            NEW,
            33,
            "unknown rollback action `page someone`; valid: `roll back`, `investigate`",
        ),
        (
            "rollback condition on an unknown metric",
            33,
            "- `metrics.ttft.p99` above 200 ms for 5m: roll back",
            NEW,
            33,
            "unknown metric `metrics.ttft.p99`",
        ),
        ("link to nothing", 40, "- Supersedes 0007", NEW, 40, "no record has that number"),
        (
            "link to the wrong file",
            41,
            "- Supersedes [ADR-0001](0001-other.md)",
            NEW,
            41,
            "link target `0001-other.md`",
        ),
    ];
    for (what, line, text, path, want_line, fragment) in cases {
        let problems = lint_files(&files(&with_line(*line, text)));
        let lines: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(problems.len(), 1, "{what}: {lines:#?}");
        let p = &problems[0];
        assert_eq!((p.path.to_str().unwrap(), p.line), (*path, *want_line), "{what}: {}", p);
        assert!(p.message.contains(fragment), "{what}: {p}");
        assert!(p.to_string().starts_with(&format!("{path}:{want_line}: ")), "{what}: {p}");
    }
}

#[test]
fn supersession_is_checked_both_ways() {
    // NEW no longer lists Supersedes: OLD's status is reported.
    let problems = lint_files(&files(&with_line(41, "None.")));
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!((problems[0].path.to_str().unwrap(), problems[0].line), (OLD, 3));
    assert!(problems[0].message.contains("does not list `Supersedes 0001`"), "{}", problems[0]);
    // OLD is not marked superseded: NEW's link is reported (and OLD's own Links line).
    let old = OLD_TEXT.replace("- Status: Superseded by 0002", "- Status: Accepted");
    let problems = lint_files(&[(OLD.into(), old), (NEW.into(), GOOD.into())]);
    let got: Vec<(String, usize)> =
        problems.iter().map(|p| (p.path.display().to_string(), p.line)).collect();
    assert_eq!(got, vec![(OLD.into(), 37), (NEW.into(), 41)], "{problems:#?}");
    assert!(problems[1].message.contains("run `cargo xtask adr supersede 1 2`"), "{}", problems[1]);
    // Superseded by a record that does not exist.
    let old = OLD_TEXT.replace("Superseded by 0002", "Superseded by 0009");
    let problems = lint_files(&[(OLD.into(), old), (NEW.into(), GOOD.into())]);
    assert!(
        problems.iter().any(|p| p.line == 3 && p.message.contains("no record has that number")),
        "{problems:#?}"
    );
}

#[test]
fn file_names_and_numbers() {
    let problems = lint_files(&[(
        PathBuf::from("docs/adr/2-Chunked.md"),
        GOOD.replace("- Supersedes [ADR-0001](0001-use-defaults.md)", "None."),
    )]);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].message.contains("file name `2-Chunked.md` is not `NNNN-slug.md`"),
        "{}",
        problems[0]
    );
    let alone = GOOD.replace("- Supersedes [ADR-0001](0001-use-defaults.md)", "None.");
    // Not live, so only the number clashes.
    let other = alone.replace("- Status: Accepted", "- Status: Proposed");
    let problems = lint_files(&[
        (PathBuf::from("docs/adr/0002-a.md"), alone.clone()),
        (PathBuf::from("docs/adr/0002-b.md"), other),
    ]);
    let got: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(
        got,
        vec![
            "docs/adr/0002-a.md:1: number 0002 is also used by docs/adr/0002-b.md; numbers are unique",
            "docs/adr/0002-b.md:1: number 0002 is also used by docs/adr/0002-a.md; numbers are unique",
        ]
    );
}

#[test]
fn two_live_records_on_one_metric_are_named_both() {
    let first = GOOD.replace("- Supersedes [ADR-0001](0001-use-defaults.md)", "None.");
    let second = first.replace("ADR-0002", "ADR-0003");
    let problems = lint_files(&[
        (PathBuf::from(NEW), first),
        (PathBuf::from("docs/adr/0003-again.md"), second),
    ]);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    for p in &problems {
        assert_eq!(p.path.to_str().unwrap(), "docs/adr/0003-again.md");
        assert!(
            p.message.contains("ADR-0002 (docs/adr/0002-enable-chunked-prefill.md:")
                && p.message.contains("ADR-0003 (docs/adr/0003-again.md:"),
            "{p}"
        );
    }
}

#[test]
fn crlf_front_matter_and_the_reference_shape_parse() {
    assert_eq!(lint_files(&files(&GOOD.replace('\n', "\r\n"))), vec![]);
    let front = GOOD
        .replace("- Status: Accepted\n- Date: 2025-05-01\n- Deciders: Platform team\n\n", "")
        .replacen("# ADR-0002", "---\nstatus: Accepted\ndate: \"2025-05-01\"\ndeciders: Platform team\ntags: [engine]\n---\n# ADR-0002", 1);
    assert_eq!(lint_files(&files(&front)), vec![]);
    let adr = parse_adr(NEW.as_ref(), &front);
    assert_eq!(adr.status.as_ref().map(|s| s.line), Some(2));
    assert_eq!(adr.thresholds[0].line, 29);
    // Numbered headings, bold fields, a Status section, backticked decision lines.
    let reference = GOOD
        .replace("- Status: Accepted\n", "")
        .replace("- Date: 2025-05-01", "**Date:** 2025-05-01")
        .replace("- Deciders: Platform team", "**Deciders**: Platform team")
        .replace("## Context", "## Status\n\nAccepted\n\n## 1. Context")
        .replace("## Metrics matrix", "## 2. Metrics matrix")
        .replace("## Decision", "## 3. Solidified rules")
        .replace(
            "- configs/engine.toml: scheduler.enable_chunked_prefill = true",
            "- `configs/engine.toml: scheduler.enable_chunked_prefill = true`",
        )
        .replace("## Rollback conditions", "## 4. Rollback");
    assert_eq!(lint_files(&files(&reference)), vec![]);
    let set = decision_lines(NEW.as_ref(), &reference).unwrap();
    assert_eq!((set.status, set.lines.len()), (AdrStatus::Accepted, 2));
}

#[test]
fn the_template_is_all_placeholders_and_fills_into_a_clean_record() {
    let template =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/adr/template.md"))
            .unwrap();
    let path = PathBuf::from("docs/adr/0003-from-template.md");
    let problems = lint_files(&[(path.clone(), template.clone())]);
    assert!(!problems.is_empty());
    assert!(
        problems.iter().any(|p| p.line == 1 && p.message.contains("`<decision title>`")),
        "{problems:#?}"
    );
    assert!(
        problems.iter().any(|p| p.line == 4 && p.message.contains("`YYYY-MM-DD`")),
        "{problems:#?}"
    );
    let filled = template
        .replace("ADR-NNNN: <decision title>", "ADR-0003: Cap batched tokens")
        .replace("YYYY-MM-DD", "2025-06-01")
        .replace("<names>", "Platform team")
        .replace("<the scenario: load (concurrency or rate, arrival), prompt lengths, model and hardware; the\nsymptom (TTFT/TPOT P99, goodput, cost); what triggered this tuning>", "Closed loop at 64.")
        .replace("<measured>", "1")
        .replace("<conclusion>", "chosen")
        .replace("<what is decided, in a sentence>", "Cap batched tokens.")
        .replace("<section.key> = <value>", "scheduler.max_num_batched_tokens = 2048")
        .replace("<limit>", "200")
        .replace("<the profile they were measured with, in backticks>", "`default`")
        .replace("<when to roll back (a blocking threshold broken on a gate run, for how long) and what rolling back\nrestores>", "When TTFT breaks 200 ms.")
        .replace("<what changes for operators, capacity and cost; what this decision gives up>", "Less throughput.");
    assert_eq!(lint_files(&[(path.clone(), filled.clone())]), vec![], "{filled}");
}

/// OLD accepted and live, NEW (line 41 replaced) Accepted: the pair for partial supersession.
fn partial(link: &str) -> Vec<(PathBuf, String)> {
    let old = OLD_TEXT
        .replace("- Status: Superseded by 0002", "- Status: Accepted")
        .replace("- Superseded by [ADR-0002](0002-enable-chunked-prefill.md)", "None.");
    vec![(PathBuf::from(OLD), old), (PathBuf::from(NEW), with_line(41, link))]
}

#[test]
fn a_record_may_supersede_named_thresholds_and_keys_of_another() {
    use xtask::adr::live::{decision_conflicts, live_thresholds};
    // Without the link, both records are live and clash on the metric and the key.
    let clash = lint_files(&partial("None."));
    assert_eq!(clash.len(), 2, "{clash:#?}");
    // Taking over the metric and the key: OLD stays live with the rest of its decision.
    let link = "- Supersedes in part [ADR-0001](0001-use-defaults.md): `metrics.ttft_ms.p99`, \
                `configs/engine.toml: scheduler.enable_chunked_prefill`";
    let files = partial(link);
    assert_eq!(lint_files(&files), vec![]);
    let adrs: Vec<_> = files.iter().map(|(p, t)| parse_adr(p, t)).collect();
    let owners: Vec<(String, u32)> =
        live_thresholds(&adrs).iter().map(|t| (t.metric.to_string(), t.adr)).collect();
    assert_eq!(
        owners,
        [
            ("metrics.ttft_ms.p99".to_string(), 2),
            ("goodput.ratio".to_string(), 2),
            ("metrics.itl_jitter".to_string(), 2)
        ]
    );
    assert!(decision_conflicts(&adrs).is_empty());
    // Only the metric: the key still clashes, named both.
    let files = partial("- Supersedes in part 0001: metrics.ttft_ms.p99");
    let problems = lint_files(&files);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].message.contains("is decided differently by two live records"));
    // A Proposed record takes nothing over yet.
    let mut files = partial(link);
    files[1].1 = files[1].1.replace("- Status: Accepted", "- Status: Proposed");
    let adrs: Vec<_> = files.iter().map(|(p, t)| parse_adr(p, t)).collect();
    assert_eq!(live_thresholds(&adrs).len(), 1);
}

#[test]
fn a_partial_supersession_names_what_the_older_record_has() {
    let got = |link: &str| -> Vec<String> {
        lint_files(&partial(link)).into_iter().filter(|p| p.line == 41).map(|p| p.message).collect()
    };
    let m = got("- Supersedes in part 0001: `goodput.ratio`");
    assert_eq!(m.len(), 1, "{m:#?}");
    assert!(
        m[0].starts_with(
            "supersedes in part 0001 on `goodput.ratio`, but docs/adr/0001-use-defaults.md has no \
             threshold on it; its metrics: metrics.ttft_ms.p99"
        ),
        "{}",
        m[0]
    );
    let m = got("- Supersedes in part 0001: configs/engine.toml: scheduler.max_num_seqs");
    assert!(
        m[0].contains("has no decision line for it; its keys: configs/engine.toml: scheduler.enable_chunked_prefill"),
        "{m:#?}"
    );
    let m = got("- Supersedes in part 0001: ttft");
    assert!(m[0].starts_with("`ttft` is neither a metric of the registry"), "{m:#?}");
    let m = got("- Supersedes in part 0001");
    assert!(m[0].contains("names nothing it takes over"), "{m:#?}");
    // The older record must have been accepted.
    let mut files = partial("- Supersedes in part 0001: metrics.ttft_ms.p99");
    files[0].1 = files[0].1.replace("- Status: Accepted", "- Status: Proposed");
    let problems = lint_files(&files);
    assert!(
        problems.iter().any(|p| p.line == 41
            && p.message.contains("which is Proposed; only an Accepted record can be superseded")),
        "{problems:#?}"
    );
}

#[test]
fn a_supersession_cycle_is_reported() {
    // 0001 superseded by 0002 and 0002 by 0001, links both ways: each pair looks right.
    let old = OLD_TEXT.replace(
        "- Superseded by [ADR-0002](0002-enable-chunked-prefill.md)",
        "- Superseded by [ADR-0002](0002-enable-chunked-prefill.md)\n- Supersedes [ADR-0002](0002-enable-chunked-prefill.md)",
    );
    let new = GOOD.replace("- Status: Accepted", "- Status: Superseded by 0001").replace(
        "- Supersedes [ADR-0001](0001-use-defaults.md)",
        "- Supersedes [ADR-0001](0001-use-defaults.md)\n- Superseded by [ADR-0001](0001-use-defaults.md)",
    );
    let problems = lint_files(&[(OLD.into(), old), (NEW.into(), new)]);
    let got: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(
        got[0].starts_with(&format!("{OLD}:3: supersession cycle: 0001 -> 0002 -> 0001")),
        "{got:#?}"
    );
}

#[test]
fn a_link_to_an_already_superseded_record_suggests_what_works() {
    // 0003 says it supersedes 0001, but 0001 is already superseded by 0002.
    let third =
        GOOD.replace("ADR-0002", "ADR-0003").replace("- Status: Accepted", "- Status: Proposed");
    let problems = lint_files(&[
        (OLD.into(), OLD_TEXT.into()),
        (NEW.into(), GOOD.into()),
        ("docs/adr/0003-again.md".into(), third),
    ]);
    let p: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(p.len(), 1, "{p:#?}");
    assert!(!p[0].contains("adr supersede 1 3"), "{}", p[0]);
    assert!(
        p[0].contains("it is already `Superseded by 0002`: supersede that record instead (`cargo xtask adr supersede 2 3` once 0002 is Accepted)"),
        "{}",
        p[0]
    );
}

/// A record in MADR 4 shape, written by hand, with what infergate needs besides MADR (the
/// metrics matrix, decision lines, the thresholds table under Confirmation, rollback conditions).
const MADR: &str = r#"---
status: accepted
date: 2025-05-01
decision-makers: Platform team, SRE
consulted: Inference team
informed: Product
---

# Use chunked prefill

## Context and Problem Statement

Long prompts block decode at concurrency 64; TTFT P99 is 420 ms against a 500 ms SLO.

## Decision Drivers

* TTFT P99 under the SLO
* No loss of throughput

## Considered Options

* Chunked prefill with 2048 batched tokens
* Keep the defaults

## Decision Outcome

Chosen option: "Chunked prefill with 2048 batched tokens", because it halves TTFT P99.

- configs/engine.toml: scheduler.enable_chunked_prefill = true

### Consequences

* Good, because short requests no longer wait behind long prefills.
* Bad, because long prompts take a little longer end to end.

### Confirmation

A gate run of profile `default` checks:

| Metric | Comparator | Limit | Unit | Action |
|---|---|---|---|---|
| `metrics.ttft_ms.p99` | <= | 200 | ms | block |

## Pros and Cons of the Options

### Chunked prefill with 2048 batched tokens

* Good, because TTFT P99 drops from 420 ms to 182 ms.
* Bad, because TPOT P99 rises slightly.

### Keep the defaults

* Good, because nothing changes.
* Bad, because TTFT P99 stays at 420 ms.

## Metrics matrix

| Config | TTFT P99 (ms) | Conclusion |
|---|---:|---|
| Baseline | 420 | reference |
| Exp-1 | 182 | chosen |

## Rollback conditions

TTFT P99 above 200 ms on a gate run: set enable_chunked_prefill back to false.

## More Information

None.
"#;

/// A minimal MADR 4 record: what MADR asks for and nothing more.
const MADR_MINIMAL: &str = r#"---
status: proposed
date: 2025-05-01
---

# Use chunked prefill

## Context and Problem Statement

Long prompts block decode.

## Considered Options

* Chunked prefill

## Decision Outcome

Chosen option: "Chunked prefill", because it is faster.
"#;

#[test]
fn a_madr_4_record_written_by_hand_passes() {
    let path = PathBuf::from("docs/adr/0001-use-chunked-prefill.md");
    assert_eq!(lint_files(&[(path.clone(), MADR.to_string())]), vec![]);
    let adr = parse_adr(&path, MADR);
    assert_eq!(adr.status_value(), Some(AdrStatus::Accepted));
    assert_eq!(adr.deciders.as_ref().unwrap().value, "Platform team, SRE");
    // The thresholds come from the Confirmation table, once; the decision line from the
    // Decision Outcome; Considered Options and Pros and Cons are kept as other sections.
    let rows: Vec<(&str, f64)> =
        adr.thresholds.iter().map(|t| (t.metric.as_str(), t.limit)).collect();
    assert_eq!(rows, [("metrics.ttft_ms.p99", 200.0)]);
    assert_eq!(adr.profile.as_ref().map(|p| p.value.as_str()), None);
    let decided: Vec<String> = adr.decisions.iter().map(|d| d.to_string()).collect();
    assert_eq!(decided, ["configs/engine.toml: scheduler.enable_chunked_prefill = true"]);
    let headings: Vec<&str> = adr.sections.iter().map(|s| s.heading.as_str()).collect();
    assert!(
        headings.contains(&"Considered Options")
            && headings.contains(&"Pros and Cons of the Options"),
        "{headings:?}"
    );
}

#[test]
fn a_minimal_madr_record_gets_one_message_per_missing_piece() {
    let path = PathBuf::from("docs/adr/0001-min.md");
    let problems = lint_files(&[(path, MADR_MINIMAL.to_string())]);
    let got: Vec<String> = problems.iter().map(|p| p.message.clone()).collect();
    let starts = [
        "missing section `## CI gate thresholds` (MADR: `### Confirmation`",
        "missing section `## Consequences` (MADR: `### Consequences`",
        "missing section `## Links` (MADR: `## More Information`)",
        "missing section `## Metrics matrix`: the measured runs",
        "missing section `## Rollback conditions`: when to roll back",
        "no deciders; write `- Deciders: <names>` under the title (in front matter: `decision-makers: <names>`)",
    ];
    assert_eq!(got.len(), starts.len(), "{got:#?}");
    for (g, s) in got.iter().zip(starts) {
        assert!(g.starts_with(s), "{g}");
    }
}

#[test]
fn the_scenario_line_scopes_the_thresholds_and_is_checked() {
    let with = |line: &str| {
        GOOD.replace("## CI gate thresholds\n\n", &format!("## CI gate thresholds\n\n{line}\n\n"))
    };
    let ok = with("Scenario: `load.concurrency = 64`, `workload.input_lengths = [128, 256]`.");
    assert_eq!(lint_files(&files(&ok)), vec![]);
    let adr = parse_adr(NEW.as_ref(), &ok);
    let keys: Vec<String> = adr.scenario.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    assert_eq!(keys, ["load.concurrency = 64", "workload.input_lengths = [128, 256]"]);
    let bad = with("Scenario: `load.concurrency = 64`, `load concurrency`, `load.rate = fast`");
    let problems = lint_files(&files(&bad));
    let messages: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(messages.len(), 2, "{messages:#?}");
    assert!(messages[0].starts_with("`load concurrency` is not `key = value`"), "{messages:#?}");
    assert!(messages[1].starts_with("`load.rate = fast` is not `key = value`"), "{messages:#?}");
}
