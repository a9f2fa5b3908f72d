//! `cargo xtask noise` through the binary, on the embedded simulator with a configured run CV
//! (`sim.noise.run_cv`: every run's step costs times one lognormal factor of mean 1 and that
//! CV): 20 trials report that CV within 30%, a metric with zero values has no CV, the trial
//! set is a normal one, and the trials are appended to the noise history.

use crate::support::configs_repo as repo;
use crate::support::xtask;

/// The cells of the noise table's row of `metric` (the last table: the trial set's estimates
/// come first).
fn row(stdout: &str, metric: &str) -> Vec<String> {
    let line = stdout
        .lines()
        .rfind(|l| l.starts_with(&format!("| {metric} ")))
        .unwrap_or_else(|| panic!("no row of {metric} in\n{stdout}"));
    line.trim_matches('|').split('|').map(|c| c.trim().to_string()).collect()
}

fn percent(cell: &str) -> f64 {
    cell.strip_suffix('%').and_then(|v| v.parse::<f64>().ok()).unwrap_or_else(|| panic!("{cell}"))
        / 100.0
}

#[test]
fn twenty_trials_report_the_configured_run_cv_within_30_percent_and_feed_the_history() {
    let g = repo();
    let run_cv = 0.10;
    let cv_set = format!("sim.noise.run_cv={run_cv}");
    let args = [
        "noise",
        "--trials",
        "20",
        "--out",
        "noise",
        "--metric",
        "metrics.tpot_ms.mean",
        "--metric",
        "error_rate",
        "--set",
        &cv_set,
        "--set",
        "workload.repeats=1",
        "--set",
        "workload.max_tokens=16",
        "--set",
        "load.warmup_requests=2",
        "--set",
        "load.concurrency=4",
    ];
    let out = xtask(g.path(), &args);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let tpot = row(&out.stdout, "metrics.tpot_ms.mean");
    assert_eq!(tpot[1], "20", "{tpot:?}");
    let cv = percent(&tpot[3]);
    assert!((cv - run_cv).abs() <= 0.3 * run_cv, "run CV {cv} against the configured {run_cv}");
    // The interval holds the estimate, and the trials per arm for a 5% change are many more
    // than 2 at a 10% run CV (about 2·(2.58+1.64)²·0.1²/ln(1.05)² ≈ 150 at 2 metrics).
    let (lo, hi) = tpot[4].split_once(" .. ").unwrap();
    assert!(percent(lo) < cv && cv < percent(hi), "{tpot:?}");
    let per_arm: u64 = tpot[5].parse().unwrap();
    assert!(per_arm > 50, "{tpot:?}");
    // No error in any trial: zero values have no log spread, and no figure is invented.
    let errors = row(&out.stdout, "error_rate");
    assert_eq!(&errors[3..], ["—", "—", "—"], "{errors:?}");
    // A normal trial set, and a noise entry of its 20 trials in the history.
    let set = infergate_model::trials::TrialSet::load(&g.path().join("noise")).unwrap();
    assert_eq!(set.trials.len(), 20);
    assert!(out.stderr.contains("1 set(s) appended to refs/infergate/history"), "{}", out.stderr);
    let list = xtask(g.path(), &["trend", "list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let noise_rows: Vec<&str> = list.stdout.lines().filter(|l| l.contains("| noise ")).collect();
    assert_eq!(noise_rows.len(), 1, "{}", list.stdout);
    assert!(noise_rows[0].contains("| 20 "), "{}", list.stdout);
}

#[test]
fn too_few_trials_and_unknown_metrics_are_refused() {
    let g = repo();
    let out = xtask(g.path(), &["noise", "--trials", "2"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--trials"), "{}", out.stderr);
    let out = xtask(g.path(), &["noise", "--trials", "3", "--metric", "metrics.nope"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("metrics.nope: not a known metric"), "{}", out.stderr);
}
