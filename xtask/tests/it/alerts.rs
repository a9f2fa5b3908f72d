//! Rollback conditions as alerting rules: `adr alerts` writes rules that `promtool` accepts, the
//! Kubernetes manifest holds the same groups, and `--check` catches a stale file. The live
//! checks (a real Prometheus and `watch` on the simulator) are in `alerts_live`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

/// A tool of a Debian package: its path, or `None` after a loud notice (a failure under
/// `CI=true`, where `.ci/run` installs the package).
pub fn tool(name: &str, package: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file())
    });
    if found.is_none() {
        let msg = format!(
            "`{name}` not found: install Debian's `{package}` package (apt-get install -y {package})"
        );
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{msg}; CI=true needs it");
        }
        eprintln!("SKIPPED: {msg}");
    }
    found
}

/// A repository with this one's configs and one Accepted record whose rollback conditions are
/// `conditions` (list items).
pub fn repo_with_record(conditions: &str) -> tempfile::TempDir {
    let r = copy_of_configs();
    let record = format!(
        "# ADR-0001: Canary of the default engine\n\n- Status: Accepted\n- Date: 2026-01-01\n\
         - Deciders: Platform team\n\n## Context\n\nA canary.\n\n## Metrics matrix\n\n\
         | Config | TTFT P99 (ms) | Conclusion |\n|---|---:|---|\n| Baseline | 40 | reference |\n\n\
         ## Decision\n\n- configs/engine.toml: scheduler.max_num_seqs = 256\n\n\
         ## CI gate thresholds\n\n| Metric | Comparator | Limit | Unit | Action |\n\
         |---|---|---|---|---|\n| `metrics.ttft_ms.p99` | <= | 150 | ms | block |\n\n\
         ## Rollback conditions\n\n{conditions}\n\n## Consequences\n\nNone.\n\n## Links\n\nNone.\n"
    );
    let dir = r.path().join("docs/adr");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("0001-canary.md"), record).unwrap();
    r
}

#[test]
fn the_rules_pass_promtool_and_a_stale_file_fails_the_check() {
    let r = repo_with_record(
        "- `metrics.ttft_ms.p99` above 150 ms for 5m: roll back (measured 40 in Baseline)\n\
         - `server.kv_cache_usage.max` above 95 % for 1m: investigate\n\
         - `goodput.ratio` below 0.9 for 5m: roll back",
    );
    let o = xtask(r.path(), &["adr", "alerts"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    // What it wrote, how many alerts from how many conditions, and the one it cannot export
    // (goodput.ratio below 0.9).
    redactions(r.path()).bind(|| insta::assert_snapshot!("adr_alerts_output", o.text()));
    let rules = r.path().join("deploy/prometheus/infergate-rules.yml");
    let k8s = r.path().join("deploy/k8s/infergate-prometheusrule.yml");
    assert_eq!(xtask(r.path(), &["adr", "alerts", "--check"]).code, 0);
    // The whole file, as a reviewer reads it in a pull request.
    insta::assert_snapshot!("alert_rules", std::fs::read_to_string(&rules).unwrap());

    // The manifest holds the same groups as the rules file.
    let load = |p: &Path| {
        yaml_rust2::YamlLoader::load_from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let (plain, manifest) = (load(&rules), load(&k8s));
    assert_eq!(manifest[0]["kind"].as_str(), Some("PrometheusRule"));
    assert_eq!(manifest[0]["spec"]["groups"], plain[0]["groups"]);
    let vllm = &plain[0]["groups"][0];
    assert_eq!(vllm["name"].as_str(), Some("infergate-rollback-vllm"));
    assert_eq!(vllm["rules"][0]["for"].as_str(), Some("5m"));
    assert_eq!(vllm["rules"][0]["labels"]["severity"].as_str(), Some("critical"));
    // Each condition is followed by its absent-data alert.
    assert_eq!(
        vllm["rules"][1]["alert"].as_str(),
        Some("InfergateAdr0001MetricsTtftMsP99RollBackNoData")
    );
    assert_eq!(vllm["rules"][1]["labels"]["action"].as_str(), Some("no data"));
    assert_eq!(vllm["rules"][2]["labels"]["severity"].as_str(), Some("warning"));
    assert_eq!(vllm["rules"][2]["expr"].as_str().map(|e| e.ends_with(" > 0.95")), Some(true));
    // 150 ms lies inside vLLM's (0.1, 0.25] s TTFT bucket: decided at 250 ms, and it says so.
    let ttft = vllm["rules"][0]["expr"].as_str().unwrap();
    assert!(ttft.contains("le=~\"0\\\\.25\"") && ttft.ends_with(" > 0.01"), "{ttft}");
    let decided = vllm["rules"][0]["annotations"]["decided"].as_str().unwrap();
    assert!(decided.contains("whose bound 250 ms is the effective limit"), "{decided}");

    // A record edited without regenerating: the check names the file and exits 1.
    let record = r.path().join("docs/adr/0001-canary.md");
    let text = std::fs::read_to_string(&record)
        .unwrap()
        .replace("for 5m: roll back (", "for 2m: roll back (");
    std::fs::write(&record, text).unwrap();
    let o = xtask(r.path(), &["adr", "alerts", "--check"]);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    // The stale file named, and the difference (`for: 2m` where it says 5m).
    redactions(r.path()).bind(|| insta::assert_snapshot!("adr_alerts_check_stale", o.text()));

    let Some(promtool) = tool("promtool", "prometheus") else { return };
    for file in [&rules, &repo_root().join("deploy/prometheus/infergate-rules.yml")] {
        let out = Command::new(&promtool).arg("check").arg("rules").arg(file).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "promtool check rules {}:\n{text}", file.display());
        assert!(text.contains("SUCCESS"), "{text}");
    }
}
