//! `cargo xtask bench --shard I/N` and `cargo xtask bench merge`: two shard processes against
//! one standalone simulator (`cargo xtask sim`), merged into a run that `gate` and `report`
//! read; a merge missing a shard exits 1 and says it is incomplete; shard flags that cannot
//! work are refused before anything is measured.

use std::path::Path;

use crate::support::*;

fn shard_args<'a>(
    url: &'a str,
    model: &'a str,
    shard: &'a str,
    out: &'a str,
    at: &'a str,
) -> Vec<&'a str> {
    vec![
        "bench",
        "--quiet",
        "--base-url",
        url,
        "--model",
        model,
        "--shard",
        shard,
        "--run-id",
        "cli-shards",
        "--start-at",
        at,
        "--out",
        out,
        "--concurrency",
        "2",
        "--requests",
        "8",
        "--max-tokens",
        "4",
        "--set",
        "load.warmup_requests=0",
    ]
}

fn summary_of(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn shard_processes_merge_into_one_run_that_gate_and_report_read() {
    let ws = copy_of_configs();
    let (_sim, model, url) = start_sim(ws.path(), &["--profile", "oracle"]);
    let at = (chrono::Utc::now() + chrono::Duration::seconds(2))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let children: Vec<Reaped> = (0..2)
        .map(|i| {
            let (shard, out) = (format!("{i}/2"), format!("runs/shard-{i}"));
            let args = shard_args(&url, &model, &shard, &out, &at);
            Reaped(
                xtask_command(ws.path(), &args)
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    for mut c in children {
        assert!(c.0.wait().unwrap().success());
    }
    let shard0 = summary_of(&ws.path().join("runs/shard-0"));
    assert_eq!(shard0["run_id"], "cli-shards");
    assert_eq!(shard0["config"]["load"]["concurrency"], 1, "its part of --concurrency 2");
    assert_eq!(shard0["extra"]["shard"]["total"]["concurrency"], 2);
    let merge =
        ["bench", "merge", "runs/shard-1", "runs/shard-0", "--out", "runs/merged", "--quiet"];
    let out = xtask_output(ws.path(), &merge);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("0/2") && stdout.contains("1/2"), "{stdout}");
    let merged = summary_of(&ws.path().join("runs/merged"));
    assert_eq!(merged["status"], "complete");
    assert_eq!(merged["requests"]["ok"], 8);
    assert_eq!(merged["config"]["load"]["concurrency"], 2);
    assert_eq!(merged["extra"]["merge"]["complete"], true);
    assert!(merged["invocation"]["command"].as_str().unwrap().contains("bench merge"));
    // A normal run for the commands that read runs.
    std::fs::create_dir_all(ws.path().join("thresholds")).unwrap();
    let gate = "version = 1\n\n[[threshold]]\nmetric = \"metrics.ttft_ms.p99\"\ncomparator = \"<=\"\n\
                limit = 60000.0\nunit = \"ms\"\naction = \"block\"\nadr = 1\n\
                file = \"docs/adr/0001-x.md\"\nline = 9\n";
    std::fs::write(ws.path().join("thresholds/gate.toml"), gate).unwrap();
    let out = xtask_output(ws.path(), &["gate", "runs/merged"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("metrics.ttft_ms.p99"), "{stdout}");
    let out = xtask_output(ws.path(), &["report", "runs/merged"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(ws.path().join("runs/merged/report.html").exists());
    // One shard missing: written, marked incomplete, exit 1.
    let out =
        xtask_output(ws.path(), &["bench", "merge", "runs/shard-0", "--out", "runs/half", "-q"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the merged run is interrupted: incomplete: shard(s) 1/2"), "{err}");
    assert_eq!(summary_of(&ws.path().join("runs/half"))["extra"]["merge"]["missing"][0], 1);
    // A shard whose requests.jsonl was cut in half, or whose histogram log is garbage: the
    // merge is incomplete (exit 1) and names the shard and what disagrees.
    let cut = ws.path().join("runs/shard-1/requests.jsonl");
    let full = std::fs::read_to_string(&cut).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    std::fs::write(&cut, lines[..lines.len() / 2].join("\n") + "\n").unwrap();
    let args = ["bench", "merge", "runs/shard-0", "runs/shard-1", "--out", "runs/cut", "-q"];
    let out = xtask_output(ws.path(), &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("incomplete: shard 1/2 (") && err.contains("runs/shard-1"), "{err}");
    assert!(err.contains("requests.jsonl holds 2 measured and 0 warmup requests"), "{err}");
    assert_eq!(summary_of(&ws.path().join("runs/cut"))["extra"]["merge"]["complete"], false);
    std::fs::write(&cut, full).unwrap();
    std::fs::write(ws.path().join("runs/shard-1/histograms.hlog"), "garbage\n#x\n1,2,3\n").unwrap();
    let args = ["bench", "merge", "runs/shard-0", "runs/shard-1", "--out", "runs/garbage", "-q"];
    let out = xtask_output(ws.path(), &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("histograms.hlog cannot be read"), "{err}");
}

#[test]
fn shard_flags_that_cannot_work_are_refused() {
    let ws = copy_of_configs();
    let refused = |args: &[&str], want: &str| {
        let out = xtask_output(ws.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    };
    let url = "http://127.0.0.1:9";
    refused(&["bench", "--base-url", url, "--shard", "0/2"], "needs --run-id or --start-at");
    refused(&["bench", "--shard", "0/2", "--run-id", "r"], "measures the embedded simulator");
    refused(&["bench", "--base-url", url, "--shard", "2/2", "--run-id", "r"], "0..=1");
    refused(&["bench", "--base-url", url, "--shard", "0/2", "--run-id", "a/b"], "not a run id");
    refused(&["bench", "--base-url", url, "--shard", "0/2", "--start-at", "noon"], "RFC 3339");
    refused(&["bench", "--shard", "0/2", "--sweep", "rate=1,2"], "cannot be used with");
    refused(
        &["bench", "--base-url", url, "--shard", "0/32", "--run-id", "r"],
        "load.concurrency = 16 cannot be split over 32 shards",
    );
    refused(&["bench", "merge"], "DIR");
}
