//! Records written from capacity searches, and the thresholds bound to a load they propose
//! ("holds the SLO at load L"): `adr new` from two searches on the simulator writes the
//! Capacity at SLO column, the conclusion and the threshold row; the record lints clean,
//! `adr thresholds` carries the load into gate.toml, the gate decides it on a run at that load
//! (pass on the unchanged configuration, fail with a quarter of the slots) and lists it as not
//! applicable at another load; `adr alerts` says no alert evaluates it; the MCP `gate` tool
//! reports it like the other checks; `bench ab` checks it only when its arms run its load.
//! Without the simulator: the gate's verdict is not changed by a threshold of another load,
//! lint refuses a load that is none, and the alerts name it.

use infergate_model::Summary;
use infergate_model::trials::{Trial, TrialSet};
use xtask::thresholds::{CheckOutcome, GateOptions, Thresholds};

use crate::support::*;

/// Two identical trials of `s`: every estimate is the value, with a zero-width interval.
fn twice(s: &Summary) -> TrialSet {
    let trial = |i: u32| Trial { dir: format!("trial-0{i}").into(), summary: s.clone() };
    TrialSet::from_trials("set".into(), vec![trial(1), trial(2)])
}

/// gate.toml holding `rows` (`[[threshold]]` bodies without provenance), each from ADR-0002.
fn gate_toml(rows: &[&str]) -> Thresholds {
    let mut text = "version = 1\n".to_string();
    for (i, r) in rows.iter().enumerate() {
        text.push_str(&format!(
            "[[threshold]]\n{r}\nadr = 2\nfile = \"docs/adr/0002-x.md\"\nline = {}\n",
            40 + i
        ));
    }
    xtask::thresholds::file::parse(&infergate_model::config::Source::new("gate.toml", text))
        .unwrap()
}

const GOODPUT: &str =
    "metric = \"goodput.ratio\"\ncomparator = \">=\"\nunit = \"ratio\"\naction = \"block\"";

/// A run at another load than a load-bound threshold's: the threshold is not applicable, says
/// the load measured and the command that measures its own, and changes nothing in the
/// verdict; at its load it is decided like any threshold.
#[test]
fn a_threshold_bound_to_another_load_is_not_applicable_and_leaves_the_verdict() {
    // The fixture runs a closed loop at concurrency 64 with goodput 0.97.
    let run = summary("r", 180.0, 20.0, 0.97, engine_params(true, 2048));
    let at = |load: &str, limit: f64| format!("{GOODPUT}\nlimit = {limit}\nload = \"{load}\"");
    let plain = format!("{GOODPUT}\nlimit = 0.9");
    let t = gate_toml(&[&plain, &at("concurrency 24", 0.99)]);
    let r = xtask::thresholds::evaluate(&twice(&run), &t, &GateOptions::default());
    let verdicts: Vec<CheckOutcome> = r.checks.iter().map(|c| c.verdict).collect();
    assert_eq!(verdicts, [CheckOutcome::PASS, CheckOutcome::NotApplicable]);
    assert_eq!((r.status().code(), r.passes()), (0, 1), "{r:?}");
    let why = r.checks[1].reason.as_deref().unwrap();
    assert!(
        why.contains("the run measured concurrency 64")
            && why.contains("`cargo xtask bench --profile default --concurrency 24 --gate`"),
        "{why}"
    );
    let text = xtask::thresholds::render_report(&r, false);
    assert!(text.contains("| >= 0.99 at concurrency 24 |"), "{text}");
    assert!(text.contains("not applicable (other load)"), "{text}");
    assert!(text.contains("not applicable: ADR-0002 goodput.ratio >= 0.99 at concurrency 24: "));
    assert!(text.contains("gate passed: 2 checks, 1 passed, 0 blocking failed, 0 blocking inconclusive, 0 warnings, 1 not applicable (another load)"), "{text}");
    // At the run's own load the same limit is decided: 0.97 breaks 0.99.
    let t = gate_toml(&[&plain, &at("concurrency 64", 0.99)]);
    let r = xtask::thresholds::evaluate(&twice(&run), &t, &GateOptions::default());
    assert_eq!(r.checks[1].verdict, CheckOutcome::FAIL);
    assert_eq!(r.status().code(), 1);
    let text = xtask::thresholds::render_report(&r, false);
    assert!(text.contains("goodput.ratio = 0.97 breaks >= 0.99 at concurrency 64"), "{text}");
    // A rate is another dimension: not this closed loop's load.
    let t = gate_toml(&[&at("rate 64", 0.5)]);
    let r = xtask::thresholds::evaluate(&twice(&run), &t, &GateOptions::default());
    assert_eq!(r.checks[0].verdict, CheckOutcome::NotApplicable);
}

/// A record with the thresholds table of `rows` (an `At load` column last) and everything lint
/// asks for, Accepted.
fn record(rows: &str) -> String {
    format!(
        "# ADR-0001: Hold the SLO at 24\n\n- Status: Accepted\n- Date: 2026-01-01\n\
         - Deciders: Platform team\n\n## Context\n\nCapacity.\n\n\
         Measured scenario: profile `default`, closed loop.\n\n## Metrics matrix\n\n\
         | Config | Capacity at SLO | Conclusion |\n|---|---:|---|\n\
         | Baseline | [24, 28) concurrency | reference |\n\n## Decision\n\n\
         - configs/engine.toml: scheduler.max_num_seqs = 256\n\n## CI gate thresholds\n\n\
         | Metric | Comparator | Limit | Unit | Action | At load |\n|---|---|---|---|---|---|\n\
         {rows}\n\n## Rollback conditions\n\n\
         - `metrics.ttft_ms.p99` above 150 ms for 5m: roll back\n\n\
         ## Consequences\n\nNone.\n\n## Links\n\nNone.\n"
    )
}

fn repo_with(text: &str) -> tempfile::TempDir {
    let r = copy_of_configs();
    std::fs::create_dir_all(r.path().join("docs/adr")).unwrap();
    std::fs::write(r.path().join("docs/adr/0001-hold.md"), text).unwrap();
    r
}

/// Lint refuses an `At load` cell that is no load (a fractional concurrency, an unknown
/// dimension, a rate of 0), at its line, naming what is valid; a valid one passes and reaches
/// gate.toml; the alerts list it as what no alert evaluates.
#[test]
fn lint_refuses_a_load_that_is_none_and_the_files_carry_a_valid_one() {
    let ok = "| `metrics.ttft_ms.p99` | <= | 150 | ms | block | — |\n\
              | `goodput.ratio` | >= | 0.95 | ratio | block | `concurrency 24` |";
    let r = repo_with(&record(ok));
    let lint = xtask(r.path(), &["adr", "lint"]);
    assert_eq!(lint.code, 0, "{}", lint.text());
    let o = xtask(r.path(), &["adr", "thresholds"]);
    assert_eq!(o.code, 0, "{}", o.text());
    let gate = std::fs::read_to_string(r.path().join("thresholds/gate.toml")).unwrap();
    assert_eq!(gate.matches("load = \"concurrency 24\"").count(), 1, "{gate}");
    assert!(gate.contains("# One with a `load` gates runs measured at that load only"), "{gate}");
    let o = xtask(r.path(), &["adr", "alerts"]);
    assert_eq!(o.code, 0, "{}", o.text());
    assert!(
        o.stdout.contains(
            "not an alert (holds the SLO at a chosen load, which production traffic does not \
             run at; decided by `gate` on a run at that load): ADR-0001 goodput.ratio >= 0.95 at \
             concurrency 24 (profile `default`, docs/adr/0001-hold.md:"
        ),
        "{}",
        o.stdout
    );
    for f in ["deploy/prometheus/infergate-rules.yml", "deploy/k8s/infergate-prometheusrule.yml"] {
        let text = std::fs::read_to_string(r.path().join(f)).unwrap();
        assert!(text.contains("# Not an alert: a threshold bound to a load"), "{f}: {text}");
        assert!(!text.contains("InfergateAdr0001GoodputRatio"), "{f}: no rule for it");
    }
    assert_eq!(xtask(r.path(), &["adr", "alerts", "--check"]).code, 0);
    assert_eq!(xtask(r.path(), &["adr", "thresholds", "--check"]).code, 0);

    let bad = "| `goodput.ratio` | >= | 0.95 | ratio | block | concurrency 2.5 |\n\
               | `goodput.ratio` | >= | 0.9 | ratio | block | qps 4 |\n\
               | `goodput.ratio` | >= | 0.9 | ratio | warn | rate 0 |";
    let r = repo_with(&record(bad));
    let lint = xtask(r.path(), &["adr", "lint"]);
    assert_eq!(lint.code, 1, "{}", lint.text());
    let line = |n: usize| {
        lint.stdout
            .lines()
            .find(|l| l.starts_with(&format!("docs/adr/0001-hold.md:{n}: ")))
            .unwrap_or_else(|| panic!("no problem at line {n}: {}", lint.stdout))
            .to_string()
    };
    assert!(line(27).contains("load `concurrency 2.5`: the concurrency is a whole number"));
    assert!(line(28).contains("load `qps 4` names no load dimension"));
    assert!(line(29).contains("load `rate 0`: the rate is a number of requests per second"));
    for n in [27, 28, 29] {
        assert!(line(n).contains("write `concurrency N`"), "{}", line(n));
    }
    // The thresholds of a live record with problems do not reach gate.toml.
    assert_eq!(xtask(r.path(), &["adr", "thresholds"]).code, 1);
}

/// A bench profile on the simulator whose SLO breaks as soon as a request waits for a slot:
/// while every request has one, its TTFT is a prefill (about 50 ms); one that finds the slots
/// taken waits for a running request's 32 tokens first (hundreds of ms), well over the 80 ms
/// objective. So the SLO holds up to as many concurrent requests as the engine has slots.
#[cfg(feature = "runtime")]
const BENCH: &str = "[profile.default.load]\nconcurrency = 4\nwarmup_requests = 0\n\
    [profile.default.workload]\ninput_lengths = [128]\nrepeats = 8\nmax_tokens = 32\n\
    [profile.default.sim]\nengine_config = \"configs/engine.toml\"\n\
    [profile.default.slo]\nttft_ms = 80\n";

#[cfg(feature = "runtime")]
fn engine(slots: u32) -> String {
    format!(
        "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 4096\n\
         [scheduler]\nmax_num_seqs = {slots}\n[device]\nname = \"H100-SXM-80GB\"\n\
         price_per_hour = 2.0\n"
    )
}

/// A capacity search of the working tree's engine config into `out`: a closed loop from 4 up
/// to 12 concurrent requests, two trials a probe, within 2000 requests.
#[cfg(feature = "runtime")]
fn capacity(root: &std::path::Path, out: &str) -> infergate_model::capacity::CapacityFile {
    let o = xtask(
        root,
        &[
            "bench",
            "-q",
            "--capacity",
            "concurrency",
            "--capacity-start",
            "4",
            "--capacity-max",
            "12",
            "--capacity-trials",
            "2",
            "--capacity-budget",
            "2000",
            "--out",
            out,
        ],
    );
    assert!(matches!(o.code, 0 | 1), "{}", o.text());
    infergate_model::capacity::CapacityFile::read(&root.join(out)).unwrap()
}

/// The gate (`--json`) of a run measured at `concurrency` into `out`, as it is decided: the exit
/// code and the check of the threshold bound to a load. The client host of a test machine is
/// often busy: the gate decides anyway (`--allow-busy-host`), as both configurations share it.
#[cfg(feature = "runtime")]
fn gate_at(root: &std::path::Path, concurrency: u32, out: &str) -> (i32, serde_json::Value) {
    let c = concurrency.to_string();
    let o = xtask(root, &["bench", "-q", "--concurrency", &c, "--requests", "32", "--out", out]);
    assert_eq!(o.code, 0, "{}", o.text());
    let json = format!("{out}.gate.json");
    let o = xtask(root, &["gate", out, "--allow-busy-host", "--no-history", "--json", &json]);
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(&json)).unwrap()).unwrap();
    let checks = file["runs"][0]["report"]["checks"].as_array().unwrap().clone();
    let bound = checks
        .into_iter()
        .find(|c| c["threshold"]["load"].is_string())
        .unwrap_or_else(|| panic!("no check bound to a load: {}", o.text()));
    (o.code, bound)
}

/// Two capacity searches on the simulator, 8 slots and a quarter of them: `adr new` writes the
/// Capacity at SLO column with both brackets, a conclusion that counts the change (the brackets
/// separate) and the threshold "holds the SLO at L", L the kept configuration's bracket's lower
/// end; the record lints clean and reaches gate.toml with its load; a run at L passes it on the
/// unchanged configuration and fails it with a quarter of the slots; a run at another load
/// lists it as not applicable; `adr alerts` lists it as what no alert evaluates.
#[cfg(feature = "runtime")]
#[test]
fn a_record_from_two_capacity_searches_holds_the_slo_at_its_load() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    std::fs::create_dir_all(root.join("configs")).unwrap();
    std::fs::write(root.join("configs/bench.toml"), BENCH).unwrap();
    let set_slots = |n: u32| std::fs::write(root.join("configs/engine.toml"), engine(n)).unwrap();
    set_slots(8);
    let base = capacity(root, "runs/cap-8");
    set_slots(2);
    let quarter = capacity(root, "runs/cap-2");
    set_slots(8);
    let (b, q) = (&base.bracket, &quarter.bracket);
    // Two slots of eight hold the SLO at a lower load, and the two searches tell them apart.
    assert!(q.separates_from(b) && q.fail.unwrap() <= b.pass.unwrap(), "{b:?} {q:?}");
    let held = b.pass.unwrap();

    let o = xtask(
        root,
        &[
            "adr",
            "new",
            "Keep eight sequences",
            "--baseline",
            "runs/cap-8",
            "--exp",
            "runs/cap-2",
            "--choose",
            "0",
            "--deciders",
            "Platform team",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.text());
    let path = root.join("docs/adr/0001-keep-eight-sequences.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let matrix: Vec<&str> = text.lines().filter(|l| l.starts_with("| ")).collect();
    assert!(matrix[0].contains("| Capacity at SLO | Conclusion |"), "{}", matrix[0]);
    let base_cell =
        format!("| {} concurrency, attainment >= 0.95 | chosen: keep the baseline |", b.text());
    assert!(matrix[1].ends_with(&base_cell), "{}", matrix[1]);
    let pct = (q.pass.unwrap() - held) / held * 100.0;
    let change = format!(
        "| {} concurrency, attainment >= 0.95 ({}, {pct:+.1}%; separate) | not chosen: worse: \
         Capacity at SLO {} -> {} \
         concurrency; other columns probed at other loads, not compared |",
        q.text(),
        infergate_model::stats::signed_sig_text(q.pass.unwrap() - held),
        b.text(),
        q.text()
    );
    assert!(matrix[2].ends_with(&change), "{}\n{change}", matrix[2]);
    let held_text = infergate_model::stats::sig_text(held);
    let row = text
        .lines()
        .find(|l| l.starts_with("| `goodput.ratio` | >= | 0.95 |"))
        .unwrap_or_else(|| panic!("no threshold holding the SLO: {text}"));
    assert!(row.starts_with("| `goodput.ratio` | >= | 0.95 | ratio | block |"), "{row}");
    assert!(row.ends_with(&format!("| `concurrency {held_text}` |")), "{row}");
    assert!(text.contains(&format!(
        "Roll back, too, when a gate run at concurrency {held_text} (`cargo xtask bench \
         --profile default --concurrency {held_text} --gate`)"
    )));

    // The placeholders a person fills; then the record lints clean and is accepted.
    let filled = text
        .replace(
            "<the scenario in words: who is affected, the symptom (P99, goodput, cost) and what \
             triggered this tuning>",
            "Chat traffic at its peak.",
        )
        .replace(
            "<what changes for operators, capacity and cost; what this decision gives up>",
            "None.",
        );
    std::fs::write(&path, filled).unwrap();
    let lint = xtask(root, &["adr", "lint"]);
    assert_eq!(lint.code, 0, "{}", lint.text());
    assert_eq!(xtask(root, &["adr", "accept", "1"]).code, 0);
    assert_eq!(xtask(root, &["adr", "thresholds"]).code, 0);
    let gate = std::fs::read_to_string(root.join("thresholds/gate.toml")).unwrap();
    assert!(gate.contains(&format!("load = \"concurrency {held_text}\"")), "{gate}");

    // At L: the unchanged configuration holds the SLO, a quarter of the slots does not.
    let held_n = held as u32;
    let (code, check) = gate_at(root, held_n, "runs/at-held");
    assert_eq!((code, check["verdict"].as_str()), (0, Some("pass")), "{check}");
    set_slots(2);
    let (code, check) = gate_at(root, held_n, "runs/at-held-quarter");
    set_slots(8);
    assert_eq!((code, check["verdict"].as_str()), (1, Some("fail")), "{check}");
    // At another load: not applicable, with the command that measures L.
    let (_, check) = gate_at(root, held_n / 2, "runs/at-half");
    assert_eq!(check["verdict"], "not_applicable", "{check}");
    let why = check["reason"].as_str().unwrap();
    assert!(why.contains(&format!("--concurrency {held_text} --gate")), "{why}");

    let o = xtask(root, &["adr", "alerts"]);
    assert_eq!(o.code, 0, "{}", o.text());
    assert!(
        o.stdout.contains(&format!(
            "not an alert (holds the SLO at a chosen load, which production traffic does not run \
             at; decided by `gate` on a run at that load): ADR-0001 goodput.ratio >= 0.95 at \
             concurrency {held_text}"
        )),
        "{}",
        o.stdout
    );
}

/// The MCP `gate` tool reports a threshold bound to a load like the others, in the gate's
/// report it returns: not applicable on a trial set measured at another load, with the reason
/// and the command that measures its load; the verdict (exit 0) left to the other checks.
#[cfg(feature = "mcp")]
#[test]
fn the_mcp_gate_tool_reports_a_threshold_of_another_load_as_not_applicable() {
    use std::io::Write;
    use std::process::Stdio;
    let g = configs_repo();
    let root = g.path();
    std::fs::create_dir_all(root.join("runs")).unwrap();
    // Fixture trials of a closed loop at concurrency 64, goodput 0.95.
    trial_set(&root.join("runs"), "set", &[180.0, 181.0, 182.0]);
    let gate = "version = 1\n\
        [[threshold]]\nmetric = \"goodput.ratio\"\ncomparator = \">=\"\nlimit = 0.9\nunit = \"ratio\"\n\
        action = \"block\"\nadr = 2\nfile = \"docs/adr/0002-x.md\"\nline = 40\n\
        [[threshold]]\nmetric = \"goodput.ratio\"\ncomparator = \">=\"\nlimit = 0.95\nunit = \"ratio\"\n\
        action = \"block\"\nload = \"concurrency 24\"\nadr = 2\nfile = \"docs/adr/0002-x.md\"\nline = 41\n";
    std::fs::create_dir_all(root.join("thresholds")).unwrap();
    std::fs::write(root.join("thresholds/gate.toml"), gate).unwrap();
    let mut server = Reaped(
        xtask_command(root, &["mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut stdin = server.0.stdin.take().unwrap();
    let mut stdout = Lines::of(server.0.stdout.take().unwrap());
    for message in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"gate","arguments":{"run":"runs/set","no_history":true}}}"#,
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    let line = stdout.wait_for(std::time::Duration::from_secs(120), "the gate's answer", |l| {
        serde_json::from_str::<serde_json::Value>(l).is_ok_and(|m| m["id"] == 2)
    });
    drop(stdin);
    let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
    let out = &answer["result"]["structuredContent"];
    assert_eq!(out["exit_code"], 0, "{out}");
    let checks = out["result"]["runs"][0]["report"]["checks"].as_array().unwrap();
    let verdicts: Vec<&str> = checks.iter().map(|c| c["verdict"].as_str().unwrap()).collect();
    assert_eq!(verdicts, ["pass", "not_applicable"], "{out}");
    assert_eq!(checks[1]["threshold"]["load"], "concurrency 24");
    let why = checks[1]["reason"].as_str().unwrap();
    assert!(
        why.contains("the run measured concurrency 64")
            && why.contains("bench --profile default --concurrency 24 --gate"),
        "{why}"
    );
    assert!(out["console"].as_str().unwrap().contains("not applicable (other load)"), "{out}");
}

/// The A/B gate compares its arms at the load both run: a threshold bound to that load adds its
/// metric to the checks, one bound to another load adds nothing and is a note of the report
/// (and of `ab.json`) naming the arms' load and the settings that compare them at its own.
#[cfg(feature = "runtime")]
#[test]
fn the_ab_gate_checks_a_threshold_bound_to_its_arms_load_and_notes_the_others() {
    let g = configs_repo();
    let root = g.path();
    let gate = "version = 1\n\
        [[threshold]]\nmetric = \"goodput.ratio\"\ncomparator = \">=\"\nlimit = 0.95\nunit = \"ratio\"\n\
        action = \"block\"\nload = \"concurrency 24\"\nadr = 2\nfile = \"docs/adr/0002-x.md\"\nline = 40\n\
        [[threshold]]\nmetric = \"metrics.tpot_ms.p99\"\ncomparator = \"<=\"\nlimit = 1000.0\nunit = \"ms\"\n\
        action = \"block\"\nload = \"concurrency 4\"\nadr = 2\nfile = \"docs/adr/0002-x.md\"\nline = 41\n";
    std::fs::create_dir_all(root.join("thresholds")).unwrap();
    std::fs::write(root.join("thresholds/gate.toml"), gate).unwrap();
    // An A/A gate of small trials at concurrency 4.
    let o = xtask(
        root,
        &[
            "bench",
            "ab",
            "main",
            "--out",
            "ab",
            "--set",
            "workload.max_tokens=16",
            "--set",
            "load.warmup_requests=2",
            "--set",
            "load.concurrency=4",
            "--max-requests",
            "300",
            "--trial-requests",
            "2",
            "--no-history",
        ],
    );
    assert!(matches!(o.code, 0 | 3), "{}", o.text());
    let file: infergate_model::ab::AbFile =
        infergate_model::artifact::read(&root.join("ab")).unwrap();
    let checks: Vec<(&str, &str)> =
        file.checks.iter().map(|c| (c.metric.as_str(), c.source.as_str())).collect();
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert_eq!(checks[0].0, "metrics.tpot_ms.p99");
    assert!(
        checks[0].1.ends_with("on ADR-0002's metric (line 41, at concurrency 4)"),
        "{checks:?}"
    );
    let note = "not applicable: ADR-0002 goodput.ratio >= 0.95 at concurrency 24 (line 40): the \
                arms run concurrency 4; compare them at that load with `bench ab --set \
                load.mode=closed --set load.concurrency=24`";
    assert!(file.notes.iter().any(|n| n.starts_with(note)), "{:?}", file.notes);
    assert!(o.stdout.contains(&format!("note: {note}")), "{}", o.stdout);
}
