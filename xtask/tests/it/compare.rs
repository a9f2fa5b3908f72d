//! `cargo xtask compare A B`: two trial sets (or runs) metric by metric, checked against
//! intervals computed by hand.

use crate::support::{engine_params, redactions, summary, trial_set, write_run, xtask};

fn metric<'a>(json: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    json["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == name).unwrap()
}

#[test]
fn two_trial_sets_are_compared_with_welch_s_interval() {
    let tmp = tempfile::tempdir().unwrap();
    let a = trial_set(tmp.path(), "a", &[100.0, 102.0, 98.0]);
    let b = trial_set(tmp.path(), "b", &[150.0, 152.0, 148.0]);
    let out = xtask(tmp.path(), &["compare", "a", "b", "--metric", "metrics.ttft_ms.p99"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("A: a (profile `default`, 3 trials, 240 measured requests)"));
    assert!(out.stdout.contains("0 better, 1 worse, 0 without a significant change"));
    // The whole console output: the table, the marks' legend, the counts.
    let shown = out.stdout.replace(&tmp.path().display().to_string(), "[TMP]");
    insta::assert_snapshot!("compare_console", shown);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(b.join("compare.json")).unwrap()).unwrap();
    let m = metric(&json, "metrics.ttft_ms.p99");
    // Each side: s = 2, n = 3, se = 2 / sqrt(3); t(0.975, 2) = 4.302653.
    let half = 4.302653 * 2.0 / 3f64.sqrt();
    assert_eq!(m["a"]["estimate"]["value"], 100.0);
    assert!((m["a"]["estimate"]["hi"].as_f64().unwrap() - (100.0 + half)).abs() < 1e-4, "{m}");
    assert_eq!(m["a"]["per_trial"], serde_json::json!([100.0, 102.0, 98.0]));
    // The difference: se_d = sqrt(2 x 4/3) = 1.632993, Welch df = 4, t(0.975, 4) = 2.776445.
    let d = &m["difference"];
    assert_eq!(d["absolute"], 50.0);
    assert!((d["df"].as_f64().unwrap() - 4.0).abs() < 1e-9, "{d}");
    assert!((d["lo"].as_f64().unwrap() - (50.0 - 2.776445 * 1.632993)).abs() < 1e-4, "{d}");
    assert_eq!((d["significant"].as_bool(), m["change"].as_str()), (Some(true), Some("worse")));
    assert!((d["relative"].as_f64().unwrap() - 0.5).abs() < 1e-12);
    // The other way round: better.
    let out = xtask(tmp.path(), &["compare", "b", "a", "--metric", "metrics.ttft_ms.p99"]);
    assert!(out.stdout.contains("1 better, 0 worse"), "{}", out.stdout);
    // Close sets: no significant change.
    trial_set(tmp.path(), "c", &[101.0, 97.0, 103.0]);
    let out = xtask(tmp.path(), &["compare", "a", "c", "--metric", "metrics.ttft_ms.p99"]);
    assert!(out.stdout.contains("0 better, 0 worse, 1 without a significant change"));
    let _ = a;
}

#[test]
fn a_single_run_says_what_it_cannot_estimate_and_bad_input_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let s = summary("one", 100.0, 40.0, 0.95, engine_params(true, 8192));
    let run = write_run(tmp.path(), &s);
    let set = trial_set(tmp.path(), "set", &[100.0, 102.0, 98.0]);
    let out = xtask(tmp.path(), &["compare", "one", "set", "--out", "cmp.json"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    // The whole console output. The fixture run has no requests.jsonl: no request-level
    // interval, and it says why ("metrics.ttft_ms.p99 in A: blank, one run without its
    // requests.jsonl"); "note: A is a single run".
    redactions(tmp.path())
        .bind(|| insta::assert_snapshot!("compare_single_run_console", out.text()));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("cmp.json")).unwrap())
            .unwrap();
    assert_eq!(metric(&json, "metrics.ttft_ms.p99")["change"], "blank");
    // Counts are observed, not tested.
    let failed = metric(&json, "requests.failed");
    assert_eq!(
        (failed["change"].as_str(), failed["a"]["estimate"]["method"].as_str()),
        (Some("not_tested"), Some("observed"))
    );
    assert!(!run.join("compare.json").exists() && !set.join("compare.json").exists());

    let out = xtask(tmp.path(), &["compare", "one", "set", "--metric", "metrics.ttft.p99"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("unknown metric `metrics.ttft.p99`"), "{}", out.stderr);
    let out = xtask(tmp.path(), &["compare", "one", "nowhere"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("cannot compare nowhere"), "{}", out.stderr);
    let out = xtask(tmp.path(), &["compare", "one", "set", "--confidence", "95"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("between 0 and 1"), "{}", out.stderr);
}
