//! `cargo xtask selftest` through the CLI: the bench against the known-answer server in a
//! process of its own (`sim --known-answer`) at a small concurrency, its own error computed and
//! within the known-answer bounds, written to `target/selftest/latest.json`, and recorded by a
//! later run on the same host as `environment.selftest` (and not by a run on another host).

use infergate_model::floor::SelftestFile;
use infergate_model::selftest::{self, SelftestOutcome, SelftestRecord};

use crate::support::*;

#[test]
fn the_selftest_measures_the_benchs_own_error_and_later_runs_record_it() {
    let r = copy_of_configs();
    // The command measures again while the machine stalls the server (up to six attempts, as
    // the known-answer tests do) and exits 3 when every attempt was disturbed.
    let o = xtask(r.path(), &["selftest", "--concurrency", "4", "--requests", "40", "--json", "-"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let record: SelftestRecord = serde_json::from_str(&o.stdout).expect(&o.stdout);
    assert_eq!(record.verdict, SelftestOutcome::WithinBounds, "{}", o.stderr);
    assert_eq!((record.concurrency, record.tokens_per_s, record.requests), (4, 400.0, 40));
    assert!((record.itl_ms - 10.0).abs() < 1e-9, "4 streams at 400 tokens/s: 10 ms each");
    let f = &record.figures;
    // Every measured request, every gap between its 64 tokens, every chunk the server sent.
    assert_eq!((f.ttft_error_ms.n, f.gap_error_ms.n, f.server_late_ms.n), (40, 40 * 63, 40 * 64));
    assert!(f.broken_bounds().is_empty(), "{}", f.line());
    assert!(f.ttft_error_ms.p50 <= selftest::TTFT_ERROR_P50_MS, "{}", f.line());
    assert!(f.ttft_error_ms.p99 <= selftest::TTFT_ERROR_P99_MS, "{}", f.line());
    assert!(f.ttft_error_ms.min >= selftest::TTFT_ERROR_MIN_MS, "{}", f.line());
    assert!(f.gap_error_ms.p50 <= selftest::GAP_ERROR_P50_MS, "{}", f.line());
    assert!(f.gap_error_ms.p99 <= selftest::GAP_ERROR_P99_MS, "{}", f.line());
    // The measured TTFT includes the trips and the reading: never below the server's.
    assert!(f.ttft_error_ms.p50 > 0.0, "{}", f.line());
    let file: SelftestFile =
        infergate_model::artifact::read(&r.path().join("target/selftest/latest.json")).unwrap();
    assert_eq!(file.selftest, record);
    assert!(o.stderr.contains("attempt 1 "), "{}", o.stderr);

    // A later run on this host carries it as its measurement floor.
    let bench = |out: &str| {
        let o = xtask(
            r.path(),
            &[
                "bench",
                "-q",
                "--concurrency",
                "2",
                "--requests",
                "4",
                "--max-tokens",
                "4",
                "--out",
                out,
            ],
        );
        assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
        infergate_model::Summary::read(&r.path().join(out)).unwrap()
    };
    let s = bench("runs/after");
    assert_eq!(s.environment.selftest.as_ref(), Some(&record));
    assert_eq!(record.environment_fingerprint, s.environment_fingerprint);

    // One made on another host is not this run's floor; nothing stands in for it.
    let mut other = file.clone();
    other.selftest.environment_fingerprint = "0000000000000000".into();
    other.write(r.path()).unwrap();
    assert_eq!(bench("runs/other-host").environment.selftest, None);
    // An unreadable one is a note, and no floor.
    std::fs::write(r.path().join("target/selftest/latest.json"), "{\"format_version\": 1}")
        .unwrap();
    let s = bench("runs/unreadable");
    assert_eq!(s.environment.selftest, None);
    assert!(
        s.notes.iter().any(|n| n.contains("latest.json") && n.contains("selftest")),
        "{:?}",
        s.notes
    );
}
