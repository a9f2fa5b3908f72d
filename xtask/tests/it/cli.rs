//! The adr and gate commands through the real binary, in a temporary repository: the round
//! trip runs -> adr new -> accept -> thresholds -> gate, supersession, exit codes and output.

use std::path::Path;

use crate::support::{Out, engine_params, regex_escape, repo_root, summary, write_run, xtask};
use xtask::thresholds::Thresholds;
use xtask::thresholds::rule::{Action, Comparator};

/// Snapshot a command's output with the temporary root and today's date filtered out.
fn snap(name: &str, root: &Path, out: &Out) {
    let text = format!("exit: {}\n--- stdout\n{}--- stderr\n{}", out.code, out.stdout, out.stderr);
    let root = regex_escape(&root.display().to_string());
    insta::with_settings!({filters => vec![
        (root.as_str(), "[root]"),
        (r"\d{4}-\d{2}-\d{2}", "[date]"),
    ]}, {
        insta::assert_snapshot!(name, text);
    });
}

/// Replace the `<...>` placeholders a person fills in (Context, Consequences).
fn fill_in(root: &Path, file: &str) {
    let path = root.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let filled: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with('<') && l.ends_with('>') {
                "Filled in by the deciders.".to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(&path, filled.join("\n") + "\n").unwrap();
}

#[test]
fn round_trip_runs_to_record_to_thresholds_to_gate() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let runs = root.join("runs");
    let base = summary("run-base", 420.5, 31.25, 0.81, engine_params(false, 8192));
    let exp1 = summary("run-exp1", 260.0, 33.0, 0.9, engine_params(true, 8192));
    let exp2 = summary("run-exp2", 182.345, 28.1, 0.97, engine_params(true, 2048));
    for s in [&base, &exp1, &exp2] {
        write_run(&runs, s);
    }

    // Several experiments need --choose.
    let out = xtask(
        root,
        &[
            "adr",
            "new",
            "Chunked prefill",
            "--baseline",
            "runs/run-base",
            "--exp",
            "runs/run-exp1",
            "--exp",
            "runs/run-exp2/summary.json",
        ],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("pass --choose N"), "{}", out.stderr);

    let out = xtask(
        root,
        &[
            "adr",
            "new",
            "Enable chunked prefill",
            "--baseline",
            "runs/run-base",
            "--exp",
            "runs/run-exp1",
            "--exp",
            "runs/run-exp2/summary.json",
            "--choose",
            "2",
            "--deciders",
            "Platform team",
        ],
    );
    snap("cli_adr_new", root, &out);
    assert_eq!(out.code, 0);
    let file = "docs/adr/0001-enable-chunked-prefill.md";
    assert!(root.join(file).exists());

    // Placeholders left: accept is refused (exit 1) and names them.
    let out = xtask(root, &["adr", "accept", "1"]);
    snap("cli_adr_accept_refused", root, &out);
    assert_eq!(out.code, 1);
    let lint = xtask(root, &["adr", "lint"]);
    assert_eq!(lint.code, 1);
    assert_eq!(
        lint.stdout.lines().filter(|l| l.contains("template placeholder")).count(),
        2,
        "{}",
        lint.stdout
    );

    fill_in(root, file);
    let out = xtask(root, &["adr", "accept", "1"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(std::fs::read_to_string(root.join(file)).unwrap().contains("- Status: Accepted\n"));
    assert_eq!(xtask(root, &["adr", "lint"]).code, 0);

    // Not written yet: --check fails.
    let out = xtask(root, &["adr", "thresholds", "--check"]);
    assert_eq!(out.code, 1);
    assert!(out.stdout.contains("does not exist"), "{}", out.stdout);
    let out = xtask(root, &["adr", "thresholds"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(xtask(root, &["adr", "thresholds", "--check"]).code, 0);

    // The same numbers: each limit is the chosen run's measured value with 10% headroom, rounded
    // away from it to three significant digits (written out, not recomputed with the code under
    // test): TTFT P99 182.345 -> 200.58 -> 201; TPOT P99 28.1 -> 30.91 -> 31.0; ITL jitter
    // 0.123 -> 0.1353 -> 0.136; goodput 0.97 -> 0.873; throughput 1344 -> 1209.6 -> 1200; KV
    // fragmentation 0.042 -> 0.0462; cost 0.5167 -> 0.56837 -> 0.569.
    let gate = Thresholds::load(&root.join("thresholds/gate.toml")).unwrap();
    let record = file.to_string();
    let row = |m: &str, c, l, a| (m.to_string(), c, l, a, 1, record.clone());
    let want = vec![
        row("metrics.ttft_ms.p99", Comparator::Le, 201.0, Action::Block),
        row("metrics.tpot_ms.p99", Comparator::Le, 31.0, Action::Block),
        row("metrics.itl_jitter", Comparator::Le, 0.136, Action::Warn),
        row("goodput.ratio", Comparator::Ge, 0.873, Action::Block),
        row("throughput.output_tokens_per_s", Comparator::Ge, 1200.0, Action::Warn),
        row("server.kv_fragmentation", Comparator::Le, 0.0462, Action::Warn),
        row("cost.per_1m_output_tokens", Comparator::Le, 0.569, Action::Warn),
    ];
    let got: Vec<_> = gate
        .thresholds
        .iter()
        .map(|t| (t.metric.to_string(), t.comparator, t.limit, t.action, t.adr, t.file.clone()))
        .collect();
    assert_eq!(got, want);
    let text = std::fs::read_to_string(root.join(file)).unwrap();
    for t in &gate.thresholds {
        let row = text.lines().nth(t.line - 1).unwrap();
        assert!(row.starts_with(&format!("| `{}` |", t.metric)), "line {} is {row}", t.line);
    }

    // These runs are summaries without their request records: a single run's interval is the
    // request bootstrap of its records, so without them nothing can be decided (exit 3), and
    // the report says why ("one run without its requests.jsonl").
    let out = xtask(root, &["gate", "runs/run-exp2"]);
    snap("cli_gate_single_run_undecided", root, &out);
    assert_eq!(out.code, 3, "{}", out.stdout);
    // Two trials of the chosen run's numbers (zero spread) pass its own gate; the baseline's
    // do not.
    let set = |name: &str, run: &infergate_model::Summary| {
        crate::support::write_set(&root.join("sets").join(name), &[run.clone(), run.clone()])
    };
    set("exp2", &infergate_model::Summary::read(&runs.join("run-exp2")).unwrap());
    set("base", &infergate_model::Summary::read(&runs.join("run-base")).unwrap());
    let out = xtask(root, &["gate", "sets/exp2"]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    let out = xtask(root, &["gate", "sets/base", "--github"]);
    snap("cli_gate_fail", root, &out);
    assert_eq!(out.code, 1);

    // A stale gate.toml is caught.
    let gate_path = root.join("thresholds/gate.toml");
    let stale =
        std::fs::read_to_string(&gate_path).unwrap().replace("limit = 201.0", "limit = 250.0");
    std::fs::write(&gate_path, stale).unwrap();
    let out = xtask(root, &["adr", "thresholds", "--check"]);
    snap("cli_thresholds_stale", root, &out);
    assert_eq!(out.code, 1);
    assert_eq!(xtask(root, &["adr", "thresholds"]).code, 0);

    // A second record on the same metrics: accept is refused until it supersedes the first.
    let exp3 = summary("run-exp3", 150.0, 25.0, 0.99, engine_params(true, 1024));
    write_run(&runs, &exp3);
    let out = xtask(
        root,
        &[
            "adr",
            "new",
            "Smaller batched tokens",
            "--baseline",
            "runs/run-exp2",
            "--exp",
            "runs/run-exp3",
            "--deciders",
            "Platform team",
            "--headroom",
            "5%",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    // adr new says that a live record gates the same runs, and how to resolve it ("note:
    // ADR-0001 is live for profile `default` and sets 7 of this record's metrics; before
    // `cargo xtask adr accept 2`, supersede it").
    snap("cli_adr_new_over_a_live_record", root, &out);
    let second = "docs/adr/0002-smaller-batched-tokens.md";
    fill_in(root, second);
    let out = xtask(root, &["adr", "accept", "2"]);
    // Refused: each threshold is set by two live records for profile `default` on this
    // environment, and the other live record decides max_num_batched_tokens otherwise.
    snap("cli_adr_accept_conflicts", root, &out);
    assert_eq!(out.code, 1);
    // The conflicts come in the order of the record's lines.
    let lines: Vec<usize> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{second}:")))
        .map(|l| l.split(':').next().unwrap().parse().unwrap())
        .collect();
    assert!(lines.len() > 2 && lines.is_sorted(), "{lines:?}\n{}", out.stdout);
    let out = xtask(root, &["adr", "supersede", "1", "2"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = xtask(root, &["adr", "accept", "2"]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    let old = std::fs::read_to_string(root.join(file)).unwrap();
    assert!(old.contains("- Status: Superseded by 0002\n"), "{old}");
    assert!(old.contains("- Superseded by [ADR-0002](0002-smaller-batched-tokens.md)\n"), "{old}");
    let new = std::fs::read_to_string(root.join(second)).unwrap();
    assert!(
        new.ends_with("## Links\n\n- Supersedes [ADR-0001](0001-enable-chunked-prefill.md)\n"),
        "{new}"
    );
    assert_eq!(xtask(root, &["adr", "lint"]).code, 0);
    assert_eq!(xtask(root, &["adr", "thresholds", "--check"]).code, 1);
    assert_eq!(xtask(root, &["adr", "thresholds"]).code, 0);
    let gate = Thresholds::load(&gate_path).unwrap();
    assert!(gate.thresholds.iter().all(|t| t.adr == 2));
    let ttft = gate.thresholds.iter().find(|t| t.metric == "metrics.ttft_ms.p99").unwrap();
    assert_eq!(ttft.limit, 158.0); // 150 * 1.05 = 157.5 -> 158

    let out = xtask(root, &["adr", "list"]);
    snap("cli_adr_list", root, &out);
    assert_eq!(out.code, 0);
}

#[test]
fn tool_errors_exit_2_and_violations_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("thresholds")).unwrap();
    std::fs::write(root.join("thresholds/gate.toml"), "version = 1\n").unwrap();

    let out = xtask(root, &["gate", "runs/none"]);
    snap("cli_gate_missing_run", root, &out);
    assert_eq!(out.code, 2);

    // No thresholds at all: nothing to gate.
    write_run(&root.join("runs"), &summary("r", 1.0, 1.0, 1.0, engine_params(true, 1)));
    let out = xtask(root, &["gate", "runs/r"]);
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("nothing to gate"), "{}", out.stdout);

    std::fs::write(
        root.join("thresholds/gate.toml"),
        "version = 1\n[[threshold]]\nmetric = \"metrics.ttft\"\n",
    )
    .unwrap();
    let out = xtask(root, &["gate", "runs/r"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("thresholds/gate.toml"), "{}", out.stderr);

    // A records directory that does not exist is a tool error; a broken record a violation.
    assert_eq!(xtask(root, &["adr", "lint"]).code, 2);
    std::fs::create_dir_all(root.join("docs/adr")).unwrap();
    std::fs::write(root.join("docs/adr/0001-x.md"), "# ADR-0001: X\n\n- Status: Acepted\n")
        .unwrap();
    let out = xtask(root, &["adr", "lint"]);
    snap("cli_adr_lint_broken", root, &out);
    assert_eq!(out.code, 1);
    assert_eq!(xtask(root, &["adr", "thresholds"]).code, 1);
    assert_eq!(xtask(root, &["adr", "accept", "7"]).code, 2);
    assert_eq!(
        xtask(root, &["adr", "new", "X", "--baseline", "runs/r", "--headroom", "150%"]).code,
        2
    );
    assert_eq!(xtask(root, &["adr", "bogus"]).code, 2);
}

#[test]
fn small_things_a_reviewer_met() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("docs/adr")).unwrap();
    // Problems in one record of two: the count says one record has them.
    let ok = "# ADR-0001: X\n\n- Status: Proposed\n";
    std::fs::write(root.join("docs/adr/0001-x.md"), ok).unwrap();
    std::fs::write(root.join("docs/adr/0002-y.md"), "# ADR-0002: Y\n\n- Status: Acepted\n")
        .unwrap();
    let out = xtask(root, &["adr", "lint"]);
    let last = out.stdout.lines().last().unwrap().to_string();
    assert!(last.contains(" problems in 2 records"), "{}", out.stdout);
    // A clean record beside it: this repository's own.
    let name = "docs/adr/0001-govern-inference-parameters-with-decision-records.md";
    std::fs::remove_file(root.join("docs/adr/0001-x.md")).unwrap();
    std::fs::copy(repo_root().join(name), root.join(name)).unwrap();
    let out = xtask(root, &["adr", "lint"]);
    let last = out.stdout.lines().last().unwrap();
    assert!(last.ends_with(" in 1 of 2 records"), "{}", out.stdout);

    // After 9999 there is no four-digit number: adr new refuses instead of writing a name its
    // own lint rejects.
    std::fs::write(root.join("docs/adr/9999-last.md"), ok).unwrap();
    write_run(&root.join("runs"), &summary("r", 1.0, 1.0, 1.0, engine_params(true, 1)));
    let out = xtask(root, &["adr", "new", "One more", "--baseline", "runs/r"]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("already holds 9999"), "{}", out.stderr);
    assert!(!root.join("docs/adr/10000-one-more.md").exists());

    // Paths are shown without `.` components.
    let out = xtask(root, &["gate", "./runs/none"]);
    assert_eq!(out.code, 2);
    assert!(!out.stderr.contains("/./"), "{}", out.stderr);
    assert!(out.stderr.contains("/runs/none"), "{}", out.stderr);
}

#[test]
fn run_directories_are_ignored_by_git() {
    let repo = git2::Repository::open(repo_root()).unwrap();
    assert!(repo.is_path_ignored("runs/baseline/summary.json").unwrap());
    assert!(!repo.is_path_ignored("docs/adr/README.md").unwrap());
}

#[test]
fn adr_list_exempt_shows_governed_values_no_live_record_names() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let write = |rel: &str, text: &str| {
        std::fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
        std::fs::write(root.join(rel), text).unwrap();
    };
    // max_num_seqs was changed under ADR-Exempt: the live record still says 256.
    write("configs/engine.toml", "[scheduler]\nmax_num_seqs = 128\nblock_size = 16\n");
    // An engine config the bench configuration names is governed too.
    write("configs/llm.toml", "[scheduler]\nmax_num_seqs = 8\n");
    write("configs/bench.toml", "[profile.x.sim]\nengine_config = \"configs/llm.toml\"\n");
    write("configs/other.toml", "[a]\nb = 1\n");
    write(
        "docs/adr/0001-x.md",
        "# ADR-0001: X\n\n- Status: Accepted\n\n## Decision\n\n\
         - configs/engine.toml: scheduler.max_num_seqs = 256\n\
         - configs/engine.toml: scheduler.block_size = 16\n\n## Links\n\nNone.\n",
    );
    let out = xtask(root, &["adr", "list", "--exempt"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    // The exempt value beside what the live record says, the other governed file's value that
    // no record names, and nothing of the ungoverned file or of a key set as decided.
    snap("cli_adr_list_exempt", root, &out);
    assert!(
        !out.stdout.contains("other.toml") && !out.stdout.contains("block_size"),
        "{}",
        out.stdout
    );

    let out = xtask(root, &["adr", "list", "--json", "-"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v[0]["adr"], 1);
    assert_eq!(v[0]["status"], "Accepted");
    assert_eq!(v[0]["live"], true);
    assert_eq!(v[0]["file"], "docs/adr/0001-x.md");
    let out = xtask(root, &["adr", "list", "--exempt", "--json", "-"]);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2, "{v}");
}

#[test]
fn adr_lint_checks_the_scope_against_the_work_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let write = |rel: &str, text: &str| {
        std::fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
        std::fs::write(root.join(rel), text).unwrap();
    };
    write("configs/bench.toml", "[profile.default]\n");
    write("configs/engine.toml", "[scheduler]\nmax_num_seqs = 256\n");
    let name = "docs/adr/0001-govern-inference-parameters-with-decision-records.md";
    let own = std::fs::read_to_string(repo_root().join(name)).unwrap();
    write(name, &own);
    let out = xtask(root, &["adr", "lint"]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    // The profile the thresholds gate is renamed away: lint names the profiles there are.
    write("configs/bench.toml", "[profile.baseline]\n");
    let out = xtask(root, &["adr", "lint"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stdout.contains("gate runs of bench profile `default`, which configs/bench.toml does not define; profiles: baseline"),
        "{}",
        out.stdout
    );
    // The governed file the live record names is deleted.
    write("configs/bench.toml", "[profile.default]\n");
    std::fs::remove_file(root.join("configs/engine.toml")).unwrap();
    let out = xtask(root, &["adr", "lint"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stdout.contains("but configs/engine.toml does not exist"), "{}", out.stdout);
}

#[test]
fn adr_supersede_with_parts_takes_over_named_thresholds_only() {
    // The governance record sets the default profile's thresholds; a new record tightens TTFT
    // without superseding the governance record itself.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("docs/adr")).unwrap();
    let name = "0001-govern-inference-parameters-with-decision-records.md";
    let own = std::fs::read_to_string(repo_root().join("docs/adr").join(name)).unwrap();
    std::fs::write(root.join("docs/adr").join(name), &own).unwrap();
    let other_rows = [
        "metrics.tpot_ms.p99",
        "metrics.itl_jitter",
        "goodput.ratio",
        "throughput.output_tokens_per_s",
    ];
    let new: String = own
        .replace(
            "# ADR-0001: Govern inference parameters with decision records",
            "# ADR-0002: Tighter TTFT",
        )
        .replace("- Status: Accepted", "- Status: Proposed")
        .replace(
            "| `metrics.ttft_ms.p99` | <= | 302 | ms | block |",
            "| `metrics.ttft_ms.p99` | <= | 250 | ms | block |",
        )
        .lines()
        .filter(|l| !other_rows.iter().any(|m| l.starts_with(&format!("| `{m}` | "))))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(root.join("docs/adr/0002-tighter-ttft.md"), &new).unwrap();

    // A part ADR-0001 does not have is refused, naming what it has.
    let out = xtask(root, &["adr", "supersede", "1", "2", "--part", "metrics.e2e_ms.p99"]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("has no threshold on it; its metrics: metrics.ttft_ms.p99"),
        "{}",
        out.stderr
    );

    let out = xtask(root, &["adr", "supersede", "1", "2", "--part", "metrics.ttft_ms.p99"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let text = std::fs::read_to_string(root.join("docs/adr/0002-tighter-ttft.md")).unwrap();
    assert!(
        text.contains(&format!("- Supersedes in part [ADR-0001]({name}): `metrics.ttft_ms.p99`\n")),
        "{text}"
    );
    // ADR-0001 is not edited, ADR-0002 can be accepted, and gate.toml takes TTFT from it and
    // the rest from ADR-0001.
    assert_eq!(std::fs::read_to_string(root.join("docs/adr").join(name)).unwrap(), own);
    let out = xtask(root, &["adr", "accept", "2"]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert_eq!(xtask(root, &["adr", "thresholds"]).code, 0);
    let gate = Thresholds::load(&root.join("thresholds/gate.toml")).unwrap();
    let owners: Vec<(String, u32, f64)> =
        gate.thresholds.iter().map(|t| (t.metric.to_string(), t.adr, t.limit)).collect();
    assert!(owners.contains(&("metrics.ttft_ms.p99".into(), 2, 250.0)), "{owners:?}");
    assert!(owners.contains(&("goodput.ratio".into(), 1, 0.9)), "{owners:?}");
    assert_eq!(owners.len(), 5, "{owners:?}");
    let out = xtask(root, &["adr", "list"]);
    assert!(out.stdout.contains("| 0001 (in part: 1) |"), "{}", out.stdout);
}

/// A record's title is one line: a line break that would write `- Status: Accepted` under the
/// title is refused before anything is written; titles CommonMark would read otherwise
/// (`../../x`, a backslash escape, emphasis) read back as given.
#[test]
fn a_title_cannot_write_the_records_header_and_reads_back_as_given() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("docs/adr")).unwrap();
    write_run(&root.join("runs"), &summary("r", 1.0, 1.0, 1.0, engine_params(true, 1)));
    let out = xtask(root, &["adr", "new", "Sneaky\n- Status: Accepted", "--baseline", "runs/r"]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("one line of text"), "{}", out.stderr);
    let out = xtask(
        root,
        &["adr", "new", "X", "--deciders", "a\r- Status: Accepted", "--baseline", "runs/r"],
    );
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert_eq!(std::fs::read_dir(root.join("docs/adr")).unwrap().count(), 0);
    for title in ["../../x", "\\..x", "*Raise* max_num_seqs to [512](x) <b>", "Issue #42 #"] {
        let out = xtask(root, &["adr", "new", title, "--baseline", "runs/r"]);
        assert!(out.stdout.contains("Proposed"), "{title}: {}{}", out.stdout, out.stderr);
    }
    let list = xtask(root, &["adr", "list", "--json", "-"]);
    let v: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    let titles: Vec<&str> =
        v.as_array().unwrap().iter().map(|r| r["title"].as_str().unwrap()).collect();
    let statuses: Vec<&str> =
        v.as_array().unwrap().iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(titles, ["../../x", "\\..x", "*Raise* max_num_seqs to [512](x) <b>", "Issue #42 #"]);
    assert!(statuses.iter().all(|s| *s == "Proposed"), "{statuses:?}");
}

/// A reader that closed the pipe (`| head`) ends the command as SIGPIPE ends any Unix tool:
/// no panic report on stderr.
#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let mut child = crate::support::xtask_command(&repo_root(), &["adr", "list"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The read end closed before the command writes a byte.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(13), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}
