//! The noise history through `gate`: each gated set is appended to `refs/infergate/history`;
//! a later set of the same scenario and fingerprint pools the history's run-to-run variance
//! (a narrower interval, more degrees of freedom, said in the notes); a history of another
//! GPU, a history noisier than... or quieter than the set (the set noisier), and a corrupt
//! history are never pooled, and the notes say which was used.

use std::path::Path;

use infergate_model::Summary;

use crate::support::gitrepo::GitRepo;
use crate::support::{engine_params, summary, write_set, xtask};

/// A repository with a gate.toml blocking TTFT P99 at `limit` ms (an empty first commit, so
/// the history ref has a repository to live in).
fn repo(limit: f64) -> GitRepo {
    let mut g = GitRepo::init();
    g.write("README.md", Some("x\n"));
    g.commit("init");
    g.checkout();
    let gate = format!(
        "version = 1\n[[threshold]]\nmetric = \"metrics.ttft_ms.p99\"\ncomparator = \"<=\"\n\
         limit = {limit:.1}\nunit = \"ms\"\naction = \"block\"\nadr = 1\nfile = \"docs/adr/0001-x.md\"\nline = 9\n\
         [[budget]]\nmetric = \"metrics.tpot_ms.mean\"\nworse_by = 0.05\naction = \"block\"\nadr = 1\n\
         file = \"docs/adr/0001-x.md\"\nline = 14\n"
    );
    std::fs::create_dir_all(g.path().join("thresholds")).unwrap();
    std::fs::write(g.path().join("thresholds/gate.toml"), gate).unwrap();
    g
}

/// Trials with these TTFT P99 values; `gpu` in the environment (the fingerprint's GPU).
fn trials(run: &str, p99: &[f64], gpu: Option<&str>) -> Vec<Summary> {
    p99.iter()
        .enumerate()
        .map(|(i, v)| {
            let mut s =
                summary(&format!("{run}-t{:02}", i + 1), *v, 20.0, 1.0, engine_params(false, 8192));
            s.environment.gpu = gpu.map(|g| infergate_model::summary::GpuInfo {
                name: g.into(),
                driver: "550".into(),
                count: 1,
            });
            s
        })
        .collect()
}

fn gate(root: &Path, set: &str) -> crate::support::Out {
    xtask(root, &["gate", set, "--allow-busy-host"])
}

/// The pooling note of TTFT P99 in a gate's output.
fn note(out: &crate::support::Out) -> String {
    out.stderr
        .lines()
        .find(|l| l.starts_with("note: metrics.ttft_ms.p99:"))
        .unwrap_or("")
        .to_string()
}

#[test]
fn matching_history_is_pooled_and_other_gpus_noisier_sets_and_corrupt_refs_are_not() {
    let g = repo(130.0);
    let root = g.path();
    // Three earlier sets of 3 trials, a spread of about 5%.
    for (k, base) in [100.0, 101.0, 99.0].iter().enumerate() {
        let set = format!("h{k}");
        write_set(
            &root.join(&set),
            &trials(&set, &[base * 0.95, *base, base * 1.05], Some("H100")),
        );
        let out = gate(root, &set);
        assert!(out.stderr.contains("set(s) appended to refs/infergate/history"), "{}", out.stderr);
        // The record's regression budget is listed as the A/B gate's, and left be.
        assert!(
            out.stderr.contains("decided by `bench ab` only")
                && out
                    .stderr
                    .contains("metrics.tpot_ms.mean at most 5% worse than the baseline (ADR-0001)"),
            "{}",
            out.stderr
        );
    }
    // A new set of 3, near the limit: alone (t at 2 df) it cannot decide; pooled it passes.
    let new = trials("new", &[105.0, 125.0, 115.0], Some("H100"));
    write_set(&root.join("new"), &new);
    let alone = xtask(root, &["gate", "new", "--allow-busy-host", "--no-history"]);
    assert_eq!(alone.code, 3, "{}{}", alone.stdout, alone.stderr);
    let out = gate(root, "new");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        note(&out).contains("pooled with 3 history set(s), 8 degrees of freedom (2 of the set)"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("pooled_t_interval"), "{}", out.stdout);
    // The same values measured on another GPU: no matching history, its own spread.
    write_set(&root.join("a100"), &trials("a100", &[105.0, 125.0, 115.0], Some("A100")));
    let out = gate(root, "a100");
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    let unmatched = out.stderr.lines().find(|l| l.starts_with("note: no matching history"));
    assert!(unmatched.is_some_and(|l| l.ends_with("metrics.ttft_ms.p99")), "{}", out.stderr);
    // A set far noisier than its history: the F test keeps its own spread.
    write_set(&root.join("noisy"), &trials("noisy", &[60.0, 125.0, 95.0], Some("H100")));
    let out = gate(root, "noisy");
    assert!(note(&out).contains("noisier than its history"), "{}", out.stderr);
    assert!(!out.stdout.contains("pooled_t_interval"), "{}", out.stdout);
    // A corrupt history: not pooled, and said so.
    let repo = git2::Repository::open(root).unwrap();
    let blob = repo.blob(b"garbage").unwrap();
    repo.reference("refs/infergate/history", blob, true, "break").unwrap();
    let out = gate(root, "new");
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("noise history: unreadable"), "{}", out.stderr);
    assert!(!out.stdout.contains("pooled_t_interval"), "{}", out.stdout);
}

#[test]
fn the_history_exports_as_csv_and_jsonl_and_merges_another_copy() {
    let g = repo(500.0);
    let root = g.path();
    write_set(&root.join("a"), &trials("a", &[100.0, 102.0], None));
    gate(root, "a");
    let csv = xtask(root, &["trend", "export"]);
    assert_eq!(csv.code, 0, "{}", csv.stderr);
    assert!(csv.stdout.starts_with(
        "id,kind,run_id,measured_at,commit,profile,scenario,fingerprint,metric,trial,value\n"
    ));
    assert!(csv.stdout.lines().any(|l| l.contains(",metrics.ttft_ms.p99,2,102")), "{}", csv.stdout);
    let jsonl = xtask(root, &["trend", "export", "--format", "jsonl", "--out", "h.jsonl"]);
    assert_eq!(jsonl.code, 0);
    let text = std::fs::read_to_string(root.join("h.jsonl")).unwrap();
    let entry = infergate_model::history::parse_line(text.lines().next().unwrap()).unwrap();
    assert_eq!(entry.values["metrics.ttft_ms.p99"], vec![Some(100.0), Some(102.0)]);
    // Another job's copy of the ref, with one more set: merged by id.
    let repo = git2::Repository::open(root).unwrap();
    let tip = repo.refname_to_id("refs/infergate/history").unwrap();
    write_set(&root.join("b"), &trials("b", &[100.0, 101.0], None));
    gate(root, "b");
    let theirs = repo.refname_to_id("refs/infergate/history").unwrap();
    repo.reference("refs/remotes/origin/infergate-history", theirs, true, "").unwrap();
    repo.reference("refs/infergate/history", tip, true, "rewind").unwrap();
    let out = xtask(root, &["trend", "merge", "refs/remotes/origin/infergate-history"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("1 entries"), "{}", out.stdout);
    let list = xtask(root, &["trend", "list"]);
    assert!(list.stdout.contains(": 2 entries"), "{}", list.stdout);
}

/// The drill: twenty A/B gates in a row in one clone, each with the simulator's noise on (5%
/// run CV, 10% step CV) and its own seed. Each appends its two sets; every set reads back (no
/// file of the history left out for an id that does not match its content) and the last gate
/// pools the nineteen before it.
#[test]
fn twenty_ab_gates_in_a_row_append_forty_sets_that_all_read_back_and_pool() {
    let g = crate::support::configs_repo();
    let root = g.path();
    const GATES: usize = 20;
    for seed in 1..=GATES {
        let seed = seed.to_string();
        let out = xtask(
            root,
            &[
                "bench",
                "ab",
                "HEAD",
                "--out",
                &format!("ab{seed}"),
                "--max-requests",
                "20",
                "--trial-requests",
                "1",
                "--set",
                "workload.max_tokens=4",
                "--set",
                "load.warmup_requests=1",
                "--set",
                "load.concurrency=2",
                "--set",
                "workload.repeats=3",
                "--set",
                "sim.noise.run_cv=0.05",
                "--set",
                "sim.noise.step_cv=0.1",
                "--set",
                &format!("sim.noise.seed={seed}"),
            ],
        );
        assert!(matches!(out.code, 0 | 3), "gate {seed}: {}\n{}", out.stdout, out.stderr);
        let all = format!("{}{}", out.stdout, out.stderr);
        assert!(all.contains("noise history: 2 set(s) appended"), "gate {seed}: {all}");
        assert!(!all.contains("left out") && !all.contains("not appended"), "gate {seed}: {all}");
    }
    let list = xtask(root, &["trend", "list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(list.stdout.contains(&format!(": {} entries", 2 * GATES)), "{}", list.stdout);
    assert!(!list.stdout.contains("left out"), "{}", list.stdout);
    // Every line reads back with its id, through the model's own reader.
    let jsonl = xtask(root, &["trend", "export", "--format", "jsonl"]);
    let entries: Vec<_> =
        jsonl.stdout.lines().map(|l| infergate_model::history::parse_line(l).unwrap()).collect();
    assert_eq!(entries.len(), 2 * GATES);
    // The last gate pooled the history's earlier A/B gates of this scenario.
    let last: infergate_model::ab::AbFile =
        infergate_model::artifact::read(&root.join(format!("ab{GATES}"))).unwrap();
    let pooled = format!("the history's {} A/B gate(s)", GATES - 1);
    assert!(
        last.priors.values().any(|p| p.label.starts_with(&pooled)),
        "{:?}",
        last.priors.values().map(|p| &p.label).collect::<Vec<_>>()
    );
}

/// A history ref that does not parse is an unreadable history (exit 2, the ref named), never
/// "no history"; a `--check` that checked nothing (no ref, nothing in its window) exits 4; an
/// export never writes over a file without `--force`, nor inside `.git/`.
#[test]
fn a_junk_ref_is_an_error_and_a_check_of_nothing_is_not_an_all_clear() {
    let g = repo(500.0);
    let root = g.path();
    // No ref at all: listing says so; a check has nothing to check.
    let list = xtask(root, &["trend", "list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let check = xtask(root, &["trend", "--fail-on-regression"]);
    assert_eq!(check.code, 4, "{}{}", check.stdout, check.stderr);
    assert!(
        check.stderr.contains("nothing checked: there is no refs/infergate/history"),
        "{}",
        check.stderr
    );
    let zero = xtask(root, &["trend", "--fail-on-regression", "--last", "0"]);
    assert_eq!(zero.code, 2, "{}", zero.stderr);
    // A history, but nothing of the metric asked for in the window.
    write_set(&root.join("a"), &trials("a", &[100.0, 102.0], None));
    assert_eq!(gate(root, "a").code, 0);
    let check =
        xtask(root, &["trend", "--fail-on-regression", "--metric", "metrics.no_such_metric"]);
    assert_eq!(check.code, 4, "{}{}", check.stdout, check.stderr);
    assert!(check.stderr.contains("no measured commit among the last 10"), "{}", check.stderr);
    // An export over an existing file, or into .git/: refused, nothing written.
    std::fs::write(root.join("h.csv"), "keep\n").unwrap();
    let out = xtask(root, &["trend", "export", "--out", "h.csv"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--out h.csv exists"), "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(root.join("h.csv")).unwrap(), "keep\n");
    let out = xtask(root, &["trend", "export", "--out", "h.csv", "--force"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(std::fs::read_to_string(root.join("h.csv")).unwrap().starts_with("id,kind,"));
    let config = std::fs::read(root.join(".git/config")).unwrap();
    let out = xtask(root, &["trend", "export", "--out", ".git/config", "--force"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("inside the git directory"), "{}", out.stderr);
    assert_eq!(std::fs::read(root.join(".git/config")).unwrap(), config);
    // Junk in the ref's file: list, check and the gate's append all say the history is
    // unreadable, naming the ref.
    std::fs::write(root.join(".git/refs/infergate/history"), "junk\n").unwrap();
    for args in [&["trend", "list"][..], &["trend", "--fail-on-regression"][..]] {
        let out = xtask(root, args);
        assert_eq!(out.code, 2, "{args:?}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.contains("refs/infergate/history cannot be read"),
            "{args:?}: {}",
            out.stderr
        );
    }
    write_set(&root.join("b"), &trials("b", &[100.0, 101.0], None));
    let out = gate(root, "b");
    assert!(out.stderr.contains("warning: noise history: not appended"), "{}", out.stderr);
}
