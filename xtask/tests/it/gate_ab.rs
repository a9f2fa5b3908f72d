//! `cargo xtask bench ab` through the binary, on the embedded simulator in a git repository
//! of its own: the base revision's engine config against the working tree's, `--candidate-set`
//! for bench settings and engine keys, exits 0 / 1 / 3 / 2 / 130, and `ab.json` and the trial
//! run directories as documented in docs/run-directory.md. The loads are small (2 to 4
//! requests of 16 tokens a trial) so each gate takes seconds.

use std::path::Path;
use std::time::Duration;

use infergate_model::ab::{AbFile, Arm, Verdict};

use crate::support::configs_repo as repo;
use crate::support::{xtask, xtask_command};

/// Small trials: 16 output tokens, 2 warmup requests, concurrency 4.
const SMALL: &[&str] = &[
    "--set",
    "workload.max_tokens=16",
    "--set",
    "load.warmup_requests=2",
    "--set",
    "load.concurrency=4",
];

fn gate(root: &Path, extra: &[&str]) -> crate::support::Out {
    let mut args = vec!["bench", "ab", "main", "--out", "ab"];
    args.extend_from_slice(SMALL);
    args.extend_from_slice(extra);
    xtask(root, &args)
}

/// `scheduler.max_num_seqs` of an engine config file.
fn max_num_seqs(path: &Path) -> i64 {
    let t: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    t["scheduler"]["max_num_seqs"].as_integer().unwrap()
}

fn ab_json(root: &Path) -> AbFile {
    infergate_model::artifact::read(&root.join("ab")).unwrap()
}

#[test]
fn a_slower_candidate_fails_early_and_every_trial_is_a_run_directory() {
    let g = repo();
    let out = gate(
        g.path(),
        &[
            "--max-requests",
            "400",
            "--trial-requests",
            "2",
            "--candidate-set",
            "sim.slowdown=2",
            "--set",
            "scheduler.max_num_seqs=128",
        ],
    );
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("A/B verdict: FAIL"), "{}", out.stdout);
    assert!(out.stdout.contains("metrics.ttft_ms.p99"), "{}", out.stdout);
    let f = ab_json(g.path());
    assert_eq!(f.status, Some(Verdict::Fail));
    assert!(
        f.trials.len() < 4 * f.design.blocks as usize,
        "a clear regression stops at an early look"
    );
    assert_eq!(
        f.candidate.sets,
        vec![
            "workload.max_tokens=16",
            "load.warmup_requests=2",
            "load.concurrency=4",
            "scheduler.max_num_seqs=128",
            "sim.slowdown=2"
        ]
    );
    // An engine key of --set is in both arms' engine configs.
    for arm in [&f.baseline, &f.candidate] {
        assert_eq!(max_num_seqs(&g.path().join(arm.engine_config.as_ref().unwrap())), 128);
    }
    assert!(f.requests <= 400);
    for t in &f.trials {
        let dir = g.path().join("ab").join(&t.dir);
        let s = infergate_model::Summary::read(&dir).unwrap();
        assert_eq!(s.requests.total, 2, "{}", t.dir);
        assert_eq!(s.workload.slice.map(|s| s.first_item), Some(t.slot.first_item));
        assert_eq!(s.isolation, Some(infergate_model::summary::Isolation::FreshEngine));
        let slowdown = s.config.profile().unwrap().sim.slowdown;
        assert_eq!(slowdown, if t.slot.arm == Arm::Candidate { 2.0 } else { 1.0 }, "{}", t.dir);
    }
    // Both arms ran, interleaved, as many trials each.
    assert_eq!(f.trials_of(Arm::Baseline), f.trials_of(Arm::Candidate));
    assert!(g.path().join("ab/warmup-baseline/summary.json").is_file());
}

#[test]
fn the_working_tree_change_is_the_candidate_and_an_unchanged_one_does_not_fail() {
    let g = repo();
    // A/A: the same config on both sides never fails (exit 0, or 3 when the noise is large).
    let out = gate(g.path(), &["--max-requests", "300", "--trial-requests", "2"]);
    assert!(out.code == 0 || out.code == 3, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("an A/A check"), "{}", out.stdout);
    // Both arms went into the noise history, the baseline's entry with the blocks' differences.
    let f = ab_json(g.path());
    assert!(f.notes.iter().any(|n| n.contains("2 set(s) appended")), "{:?}", f.notes);
    std::fs::remove_dir_all(g.path().join("ab")).unwrap();
    // One slot instead of 256, with 4 clients: the candidate queues.
    let engine = g.path().join("configs/engine.toml");
    let text = std::fs::read_to_string(&engine).unwrap();
    std::fs::write(&engine, text.replace("max_num_seqs = 256", "max_num_seqs = 1")).unwrap();
    let out = gate(g.path(), &["--max-requests", "400", "--trial-requests", "4"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let f = ab_json(g.path());
    assert_eq!(max_num_seqs(&g.path().join(f.candidate.engine_config.unwrap())), 1);
    assert_eq!(max_num_seqs(&g.path().join(f.baseline.engine_config.unwrap())), 256);
    assert!(f.baseline.source.starts_with("base "), "{}", f.baseline.source);
    // An engine key of --candidate-set makes a variant of the candidate's config.
    std::fs::write(&engine, &text).unwrap();
    std::fs::remove_dir_all(g.path().join("ab")).unwrap();
    let out = gate(
        g.path(),
        &[
            "--max-requests",
            "400",
            "--trial-requests",
            "4",
            "--candidate-set",
            "scheduler.max_num_seqs=1",
        ],
    );
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let f = ab_json(g.path());
    assert_eq!(max_num_seqs(&g.path().join(f.candidate.engine_config.unwrap())), 1);
    // The previous gate measured the same baseline scenario (4-request trials): its blocks'
    // differences are this gate's prior; the first gate's (2-request trials) are not.
    assert!(!f.priors.is_empty(), "{:?}", f.notes);
    assert!(f.priors.values().all(|p| p.label.contains("1 A/B gate(s)")), "{:?}", f.priors);
    assert!(f.notes.iter().any(|n| n.starts_with("noise history: ")), "{:?}", f.notes);
}

#[test]
fn bad_revisions_budgets_and_targets_are_refused_before_anything_runs() {
    let g = repo();
    let out = xtask(g.path(), &["bench", "ab", "nope"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("base revision `nope` is not in this repository"),
        "{}",
        out.stderr
    );
    let out = xtask(g.path(), &["bench", "ab", "main", "--max-requests", "40"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("raise --max-requests to at least"), "{}", out.stderr);
    let out = xtask(g.path(), &["bench", "ab", "main", "--profile", "vllm"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("--engine llama-cpp / vllm"), "{}", out.stderr);
    let out = xtask(g.path(), &["bench", "ab", "main", "--budget", "150%"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("such as 5%"), "{}", out.stderr);
    let out = xtask(g.path(), &["gate", "some/run", "--ab", "main"]);
    assert_eq!(out.code, 2, "a run and --ab exclude each other: {}", out.stderr);
    let out =
        xtask(g.path(), &["bench", "ab", "main", "--engine-config", "configs/engine-missing.toml"]);
    assert_eq!(out.code, 2);
    assert!(!g.path().join("ab").exists() && !g.path().join("target/gate-ab").exists());
}

#[test]
fn ctrl_c_keeps_the_measured_trials_in_ab_json() {
    let g = repo();
    let mut args = vec![
        "bench",
        "ab",
        "main",
        "--out",
        "ab",
        "--max-requests",
        "1000",
        "--trial-requests",
        "2",
    ];
    args.extend_from_slice(SMALL);
    let mut child = xtask_command(g.path(), &args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // What it says is read to the end, so it never blocks on a full pipe.
    let mut stderr = crate::support::Lines::of(child.stderr.take().unwrap());
    let mut reaped = crate::support::Reaped(child);
    // The third trial's line: three trials are in ab.json.
    stderr.wait_for(Duration::from_secs(300), "the gate's third trial", |l| {
        l.starts_with("trial 3 ")
    });
    let pid = reaped.0.id().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let status = reaped.0.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let f = ab_json(g.path());
    assert!(f.trials.len() >= 3, "{}", f.trials.len());
    assert_eq!(f.stopped, Some(infergate_model::ab::Stopped::Interrupted));
}
