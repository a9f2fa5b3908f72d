//! `cargo xtask bench --capacity`: settings that cannot answer refused before anything is sent,
//! a search against the embedded simulator ending with a bracket whose ends are decided, and an
//! open-loop probe past the simulator's capacity decided fail by the over-saturation watch.

use std::net::TcpListener;
use std::path::Path;

use infergate_model::capacity::{CapacityFile, StopReason};
use infergate_model::stats::Verdict;
use infergate_model::summary::RunStatus;

use crate::support::{Out, xtask};

/// A repository whose default profile runs the engine simulator with 4 sequences at most (a
/// server with a capacity), short answers, and an SLO on the time to first token that a
/// request waiting for a free sequence misses.
fn repo(slo: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("configs")).unwrap();
    std::fs::write(
        dir.path().join("configs/engine-small.toml"),
        "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 4096\n\
         [scheduler]\nmax_num_seqs = 4\n[device]\nname = \"H100-SXM-80GB\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("configs/bench.toml"),
        format!(
            "[profile.default.sim]\nmode = \"engine\"\nengine_config = \"configs/engine-small.toml\"\n\
             [profile.default.workload]\ninput_lengths = [64]\nrepeats = 8\nmax_tokens = 8\nignore_eos = true\n\
             [profile.default.load]\nconcurrency = 4\nrequests = 16\n\
             [profile.default.client]\ngrace_s = 1.0\n\
             [profile.default.steady]\noversaturation_s = 1.0\n{slo}"
        ),
    )
    .unwrap();
    dir
}

const SLO: &str = "[profile.default.slo]\nttft_ms = 50\n";

fn text(o: &Out) -> String {
    format!("{}{}", o.stdout, o.stderr)
}

#[test]
fn settings_that_cannot_answer_exit_2_before_anything_is_sent() {
    let with_slo = repo(SLO);
    let without_slo = repo("");
    // A server that would see any request: the refused commands measure it (--base-url).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let cases: &[(&tempfile::TempDir, &[&str], &[&str])] = &[
        (&without_slo, &[], &["--capacity", "profile `default` sets no objective in [slo]"]),
        (&with_slo, &["--capacity-target", "1.5"], &["--capacity-target", "within (0, 1]"]),
        (&with_slo, &["--capacity-target", "0"], &["--capacity-target", "within (0, 1]"]),
        (
            &with_slo,
            // One probe is 2 trials of 16 measured and 8 warmup requests.
            &["--capacity-trials", "2..5", "--capacity-budget", "47"],
            &["--capacity-budget", "smaller than one probe", "at least 48"],
        ),
        (&with_slo, &["--capacity-budget", "lots"], &["--capacity-budget", "is not a budget"]),
        (&with_slo, &["--capacity-trials", "1"], &["--capacity-trials", "at least 2"]),
        (&with_slo, &["--capacity-start", "1.5"], &["--capacity-start", "whole number"]),
        (&with_slo, &["--capacity-limit", "metrics.nope<=3"], &["--capacity-limit", "nope"]),
        (&with_slo, &["--concurrency", "4"], &["--concurrency", "cannot be used with"]),
        (&with_slo, &["--trials", "3"], &["--trials", "cannot be used with"]),
    ];
    for (r, extra, expected) in cases {
        let mut args = vec!["bench", "-q", "--base-url", &url, "--out", "runs/cap"];
        args.extend_from_slice(&["--capacity", "concurrency"]);
        args.extend_from_slice(extra);
        let o = xtask(r.path(), &args);
        assert_eq!(o.code, 2, "{extra:?}: {}", text(&o));
        for e in *expected {
            assert!(o.stderr.contains(e), "{extra:?}: `{e}` not in {}", o.stderr);
        }
        assert!(!r.path().join("runs").exists(), "{extra:?}: a directory was written");
        assert!(!r.path().join("target").exists(), "{extra:?}: a directory was written");
    }
    // The capacity's settings without --capacity are refused by the parser.
    let o = xtask(with_slo.path(), &["bench", "-q", "--capacity-target", "0.9"]);
    assert_eq!(o.code, 2, "{}", text(&o));
    assert!(o.stderr.contains("--capacity <DIM>"), "{}", o.stderr);
    // Nothing was sent: no connection waits at the server.
    let accepted = listener.accept();
    assert!(
        accepted.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "a refused command connected: {accepted:?}"
    );
}

/// Every probe's trials are run directories with their summaries; the bracket's passing end's
/// attainment interval is at or above the target, its failing end's below it or over-saturated.
fn check_probes(dir: &Path, f: &CapacityFile) {
    for p in &f.search.probes {
        for t in &p.trials {
            let rel = t.dir.as_deref().expect("a trial's directory");
            let s = infergate_model::Summary::read(&dir.join(rel))
                .unwrap_or_else(|e| panic!("{rel}: {e}"));
            assert_eq!(s.requests.total + s.requests.warmup, t.requests, "{rel}");
            assert!(s.simulated, "{rel}");
        }
    }
    let target = f.search.spec.target;
    let at = |load: f64| f.search.probes.iter().find(|p| p.load == load).expect("the probe");
    if let Some(pass) = f.bracket.pass {
        let p = at(pass);
        assert_eq!(p.verdict, Some(Verdict::Pass));
        let e = p.attainment.as_ref().expect("an interval");
        assert!(e.lo >= target, "pass at {pass}: {e:?}");
    }
    if let Some(fail) = f.bracket.fail {
        let p = at(fail);
        assert_eq!(p.verdict, Some(Verdict::Fail));
        let below = p.attainment.as_ref().is_some_and(|e| e.hi < target);
        let limit = p.limits.iter().any(|l| l.verdict == Verdict::Fail);
        let over = p.binding.as_deref() == Some("oversaturated");
        assert!(below || limit || over, "fail at {fail}: {p:?}");
    }
}

#[test]
fn a_search_against_the_simulator_ends_with_a_decided_bracket() {
    let r = repo(SLO);
    let started = std::time::Instant::now();
    let args = [
        "bench",
        "--capacity",
        "concurrency",
        "--capacity-max",
        "8",
        "--capacity-budget",
        "3000",
        "--out",
        "runs/cap",
    ];
    let o = xtask(r.path(), &args);
    let took = started.elapsed();
    assert_eq!(o.code, 0, "{}", text(&o));
    let dir = r.path().join("runs/cap");
    let f = CapacityFile::read(&dir).unwrap();
    let (pass, fail) = (f.bracket.pass.expect("a pass"), f.bracket.fail.expect("a fail"));
    assert!(pass < fail && fail <= 8.0, "{:?}", f.bracket);
    assert_eq!(f.search.stop, Some(StopReason::Resolved), "{:?}", f.notes);
    if f.indeterminate.is_empty() {
        assert!(fail - pass <= f.search.spec.step(pass), "{:?}", f.bracket);
    }
    assert_eq!(f.binding.as_deref(), Some("ttft_ms"));
    assert!(f.search.spent_requests <= 3000);
    check_probes(&dir, &f);
    // Each trial its own run id and seed; the probes in their directories.
    let first = &f.search.probes[0];
    assert_eq!(first.trials[0].dir.as_deref(), Some("probe-01-concurrency-1/trial-01"));
    // The console: each trial and decision as it came, the table, the bracket.
    assert!(o.stderr.contains("probe 1 concurrency 1, trial 1: attainment"), "{}", o.stderr);
    assert!(o.stderr.contains("probe 1 concurrency 1: pass"), "{}", o.stderr);
    let bracket = format!("capacity: concurrency {}", f.bracket.text());
    assert!(o.stdout.contains(&bracket), "{}", o.stdout);
    assert!(o.stdout.contains("binding objective: ttft_ms"), "{}", o.stdout);
    assert!(o.stdout.contains("stopped: resolved to the resolution"), "{}", o.stdout);
    // The chart, and the report of the directory.
    let svg = std::fs::read_to_string(dir.join("capacity.svg")).unwrap();
    assert!(svg.contains(&format!("data-label=\"capacity {}\"", f.bracket.text())), "{svg}");
    let rep = xtask(r.path(), &["report", "runs/cap"]);
    assert_eq!(rep.code, 0, "{}", text(&rep));
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(page.contains("Capacity under the SLO: profile default"), "the page's title");
    assert!(page.contains("data-chart=\"capacity-attainment\""), "the chart");
    eprintln!(
        "capacity search: {} in {} probes, {} trials, {} requests, {took:?}",
        f.bracket.text(),
        f.search.probes.len(),
        f.search.trials,
        f.search.spent_requests
    );
}

#[test]
fn ctrl_c_keeps_what_the_search_measured_and_exits_130() {
    use std::time::Duration;
    let r = repo(SLO);
    let args = ["bench", "-q", "--capacity", "concurrency", "--capacity-max", "8"];
    let mut child = crate::support::Reaped(
        crate::support::xtask_command(r.path(), &[&args[..], &["--out", "runs/cap"]].concat())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let file = r.path().join("runs/cap/capacity.json");
    crate::support::wait_until(Duration::from_secs(60), "the first trial", || file.is_file());
    // One Ctrl-C: a trial's run hears it during its load, the search between two runs.
    let pid = child.0.id().to_string();
    let sent = std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(sent.success());
    let status = crate::support::poll_for(Duration::from_secs(30), || child.0.try_wait().unwrap())
        .expect("the search stops after Ctrl-C");
    assert_eq!(status.code(), Some(130));
    let f = CapacityFile::read(&r.path().join("runs/cap")).unwrap();
    assert_eq!(f.search.stop, Some(StopReason::Interrupted), "{:?}", f.notes);
    assert!(f.search.trials >= 1, "the trials measured before are kept");
    check_probes(&r.path().join("runs/cap"), &f);
}

#[test]
fn an_open_loop_probe_at_twice_the_capacity_fails_over_saturated() {
    let r = repo(SLO);
    let long = ["--set", "workload.max_tokens=32"];
    // The capacity: a closed loop of as many clients as the engine runs sequences.
    let mut args = vec!["bench", "-q", "--concurrency", "4", "--requests", "40"];
    args.extend_from_slice(&long);
    args.extend_from_slice(&["--out", "runs/closed"]);
    let o = xtask(r.path(), &args);
    assert_eq!(o.code, 0, "{}", text(&o));
    let closed = infergate_model::Summary::read(&r.path().join("runs/closed")).unwrap();
    let capacity = closed.throughput.requests_per_s.expect("measured");
    let rate = format!("{:.3}", 2.0 * capacity);
    // 120 measured and 60 warmup requests a trial; the budget holds one probe (two trials).
    let mut args = vec!["bench", "-q", "--capacity", "rate", "--capacity-start", &rate];
    args.extend_from_slice(&["--capacity-max", &rate, "--capacity-trials", "2..3"]);
    args.extend_from_slice(&["--capacity-budget", "360"]);
    args.extend_from_slice(&["--requests", "120", "--out", "runs/over"]);
    args.extend_from_slice(&long);
    let o = xtask(r.path(), &args);
    assert_eq!(o.code, 1, "no load held the SLO: {}", text(&o));
    let dir = r.path().join("runs/over");
    let f = CapacityFile::read(&dir).unwrap();
    assert_eq!(f.search.probes.len(), 1, "{:?}", f.search.probes);
    let p = &f.search.probes[0];
    assert_eq!(p.verdict, Some(Verdict::Fail), "never a pass: {p:?}");
    assert_eq!(p.binding.as_deref(), Some("oversaturated"));
    assert_eq!(p.trials.len(), 1, "decided at its first trial");
    let t = &p.trials[0];
    assert!(t.oversaturated);
    assert!(t.requests < 180, "stopped early: {} of 180 requests sent", t.requests);
    let s = infergate_model::Summary::read(&dir.join(t.dir.as_deref().unwrap())).unwrap();
    assert_eq!(s.status, RunStatus::Oversaturated);
    assert_eq!(f.search.stop, Some(StopReason::Budget));
    assert_eq!(f.bracket.fail, Some(p.load));
    assert_eq!(f.binding.as_deref(), Some("oversaturated"));
    check_probes(&dir, &f);
    eprintln!(
        "capacity {capacity} requests/s; the probe at {rate}: {} requests of 180, {:.1} s",
        t.requests, t.seconds
    );
}
