//! `cargo xtask bench` as users run it: exit codes, error messages, the run directory, Ctrl-C.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Lines, http_get, poll_for, wait_until};

fn xtask(root: &Path, args: &[&str]) -> Output {
    crate::support::xtask_output(root, args)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A repository root with a bench config that uses the timing simulator.
fn repo(extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("configs")).unwrap();
    let text = format!(
        "[profile.default.sim]\nmode = \"timing\"\n[profile.default.sim.timing]\nttft_ms = 2\nitl_ms = 1\n\
         [profile.default.workload]\ninput_lengths = [8]\nrepeats = 4\nmax_tokens = 4\n\
         [profile.default.load]\nconcurrency = 2\n{extra}"
    );
    std::fs::write(dir.path().join("configs/bench.toml"), text).unwrap();
    dir
}

#[test]
fn a_successful_run_exits_0_and_writes_its_directory() {
    let r = repo("");
    let o = xtask(r.path(), &["bench", "-q", "--out", "runs/a"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for f in ["summary.json", "requests.jsonl", "histograms.hlog"] {
        assert!(r.path().join("runs/a").join(f).exists(), "{f}");
    }
    let s = infergate_model::Summary::read(&r.path().join("runs/a")).unwrap();
    assert_eq!(s.requests.ok, 4);
    assert!(s.simulated);
    // A run directory is never overwritten.
    let o = xtask(r.path(), &["bench", "-q", "--out", "runs/a"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("already holds a run"), "{}", stderr(&o));
}

#[test]
fn config_errors_name_file_line_and_choices_and_exit_2() {
    let r = repo("concurency = 4\n");
    let o = xtask(r.path(), &["bench", "-q"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("error: configs/bench.toml:12:1: unknown field"), "{e}");
    assert!(e.contains("unknown field `concurency`") && e.contains("`concurrency`"), "{e}");
    let r = repo("");
    let o = xtask(r.path(), &["bench", "-q", "--set", "load.mode=sideways"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("--set load.mode=sideways") && e.contains("closed") && e.contains("open"),
        "{e}"
    );
    let o = xtask(r.path(), &["bench", "--profile", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no profile `nope`"), "{}", stderr(&o));
    let o = xtask(r.path(), &["bench", "--bogus-flag"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_run_where_every_request_failed_exits_1() {
    let r = repo("[profile.default.sim.faults]\nhttp_503 = 1.0\n");
    let o = xtask(r.path(), &["bench", "-q", "--out", "runs/f"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no measured request succeeded (http_503: 4)"), "{}", stderr(&o));
    let s = infergate_model::Summary::read(&r.path().join("runs/f")).unwrap();
    assert_eq!(s.status, infergate_model::summary::RunStatus::Failed);
}

/// Send `signal` (`-INT`, `-TERM`) to `child` and wait (bounded) for it to exit.
fn stop(child: &mut std::process::Child, signal: &str) -> std::process::ExitStatus {
    let ok = Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
    assert!(ok.success());
    poll_for(Duration::from_secs(20), || child.try_wait().unwrap()).unwrap_or_else(|| {
        let _ = child.kill();
        panic!("the command did not stop after {signal}")
    })
}

/// Ctrl-C to `child` between two of its runs, once a second until it exits (bounded). A signal
/// that comes after one run stopped listening and before the next (its cooldown) started is
/// never heard: the process cannot be seen to listen, so an unheard signal is sent again.
fn interrupt_between_runs(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let ok = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
        assert!(ok.success());
        if let Some(status) = poll_for(Duration::from_secs(1), || child.try_wait().unwrap()) {
            return status;
        }
    }
    let _ = child.kill();
    panic!("the command did not stop after Ctrl-C")
}

#[test]
fn ctrl_c_and_sigterm_write_what_was_measured_and_exit_130() {
    for (signal, name) in [("-INT", "Ctrl-C"), ("-TERM", "SIGTERM")] {
        // Long streams so the run is still going when interrupted (400 tokens 10 ms apart). Not
        // quiet: the run says where its embedded simulator serves.
        let r = repo("[profile.default.client]\ngrace_s = 0.3\n");
        let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .arg("-C")
            .arg(r.path())
            .args([
                "bench",
                "--out",
                "runs/i",
                "--max-tokens",
                "400",
                "--set",
                "sim.timing.itl_ms=10",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = Lines::of(child.stderr.take().unwrap());
        // "embedded simulator on http://127.0.0.1:PORT (...)"
        let line =
            stderr.wait_for(Duration::from_secs(30), "the embedded simulator's address", |l| {
                l.starts_with("embedded simulator on http://127.0.0.1:")
            });
        let port: u16 = line["embedded simulator on http://127.0.0.1:".len()..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        // Interrupt once both clients' streams are being generated: two requests running and
        // more tokens generated than the preflight's one-token probes make (the load has
        // started). Each stream still has seconds to go.
        wait_until(Duration::from_secs(30), "both streams in flight at the simulator", || {
            let Some((200, m)) = http_get(port, "/metrics") else { return false };
            let value = |name: &str| {
                m.lines().find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
            };
            value("vllm:num_requests_running ") == Some(2.0)
                && value("vllm:generation_tokens_total ").is_some_and(|n| n >= 20.0)
        });
        let status = stop(&mut child, signal);
        let err = stderr.all();
        assert_eq!(status.code(), Some(130), "{signal}: {err}");
        assert!(err.contains(&format!("{name}: no new requests; waiting up to 300ms")), "{err}");
        let s = infergate_model::Summary::read(&r.path().join("runs/i")).unwrap();
        assert_eq!(s.status, infergate_model::summary::RunStatus::Interrupted, "{signal}");
        assert_eq!(
            s.requests.by_class.get("interrupted"),
            Some(&2),
            "{signal}: {:?}",
            s.requests.by_class
        );
    }
}

#[test]
fn a_signal_during_the_preflight_ends_the_command_with_nothing_measured() {
    use std::io::Read as _;
    for signal in ["-INT", "-TERM"] {
        // A target that accepts connections and never answers: the preflight waits on it.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (accepted_tx, accepted) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            if let Ok((mut conn, _)) = listener.accept() {
                let _ = accepted_tx.send(());
                let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
                // Read until the client goes away (or 30 s): never answer, never close first.
                let _ = std::io::copy(&mut conn, &mut std::io::sink());
            }
        });
        let r = repo(&format!(
            "[targets.stuck]\nbase_url = \"http://127.0.0.1:{port}\"\nmodel = \"m\"\n\
             [profile.default.client]\nrequest_timeout_s = 600\nstall_timeout_s = 600\n"
        ));
        std::fs::write(
            r.path().join("configs/bench.toml"),
            std::fs::read_to_string(r.path().join("configs/bench.toml")).unwrap()
                + "[profile.default]\ntarget = \"stuck\"\n",
        )
        .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .arg("-C")
            .arg(r.path())
            .args(["bench", "--out", "runs/p"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        accepted.recv_timeout(Duration::from_secs(30)).expect("the preflight connects");
        let status = stop(&mut child, signal);
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert_eq!(status.code(), Some(130), "{signal}: {err}");
        assert!(err.contains("no run was measured"), "{signal}: {err}");
        assert!(!r.path().join("runs/p/summary.json").exists(), "{signal}");
        assert!(!r.path().join("runs/p/requests.jsonl").exists(), "{signal}");
    }
}

#[test]
fn sim_stops_on_ctrl_c_and_sigterm_with_130() {
    for signal in ["-INT", "-TERM"] {
        let r = repo("");
        let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .arg("-C")
            .arg(r.path())
            .args(["sim", "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = Lines::of(child.stdout.take().unwrap());
        stdout.wait_for(Duration::from_secs(30), "the simulator to serve", |l| {
            l.starts_with("serving")
        });
        assert_eq!(stop(&mut child, signal).code(), Some(130), "{signal}");
    }
}

fn write_thresholds(root: &Path, limit_ms: f64) {
    std::fs::create_dir_all(root.join("thresholds")).unwrap();
    let text = format!(
        "version = 1\n\n[[threshold]]\nmetric = \"metrics.ttft_ms.p99\"\ncomparator = \"<=\"\nlimit = {limit_ms:?}\n\
         unit = \"ms\"\naction = \"block\"\nadr = 1\nfile = \"docs/adr/0001-x.md\"\nline = 9\n"
    );
    std::fs::write(root.join("thresholds/gate.toml"), text).unwrap();
}

#[test]
fn bench_gate_passes_and_blocks_on_the_thresholds() {
    let r = repo("");
    write_thresholds(r.path(), 10_000.0);
    let o = xtask(r.path(), &["bench", "-q", "--gate", "--allow-busy-host", "--out", "runs/pass"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("gate passed"));
    // The timing simulator's TTFT is 2 ms: a 0.5 ms limit cannot hold.
    write_thresholds(r.path(), 0.5);
    let o = xtask(
        r.path(),
        &["bench", "-q", "--gate", "--allow-busy-host", "--github", "--out", "runs/block"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("::error"), "{out}");
    // The run itself was written before the gate judged it.
    assert!(r.path().join("runs/block/summary.json").exists());
    // A broken thresholds file fails before measuring anything.
    std::fs::write(
        r.path().join("thresholds/gate.toml"),
        "version = 1\n[[threshold]]\nmetric = 3\n",
    )
    .unwrap();
    let o = xtask(r.path(), &["bench", "-q", "--gate", "--allow-busy-host", "--out", "runs/never"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!r.path().join("runs/never").exists());
}

#[test]
fn sweep_settings_without_a_sweep_and_two_modes_at_once_are_usage_errors() {
    let r = repo("");
    for args in [
        &["bench", "-q", "--warmup-fraction", "0.2"][..],
        &["bench", "-q", "--stage-duration", "5"][..],
    ] {
        let o = xtask(r.path(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("required") && e.contains("--sweep <DIM=V,V,...>"), "{e}");
    }
    let o = xtask(
        r.path(),
        &["bench", "-q", "--sweep", "concurrency=1,2", "--compare-strategies", "serial"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("cannot be used with") && e.contains("--compare-strategies"), "{e}");
    let o =
        xtask(r.path(), &["bench", "-q", "--sweep", "concurrency=1,2", "--warmup-fraction", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("must be within 0..0.9, got 1"), "{}", stderr(&o));
    // Nothing was measured.
    assert!(!r.path().join("target").exists());
}

#[test]
fn a_gated_sweep_gates_every_stage() {
    let r = repo("");
    write_thresholds(r.path(), 10_000.0);
    let args = [
        "bench",
        "--sweep",
        "concurrency=1,2",
        "--gate",
        "--allow-busy-host",
        "--out",
        "sweeps/pass",
    ];
    let o = xtask(r.path(), &args);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("gate, stage 1/2 concurrency=1:"), "{out}");
    assert!(out.contains("gate, stage 2/2 concurrency=2:"), "{out}");
    assert!(out.contains("gate passed for every run"), "{out}");
    // The timing simulator's TTFT is 2 ms: a 0.5 ms limit cannot hold, in any stage.
    write_thresholds(r.path(), 0.5);
    let args = [
        "bench",
        "--sweep",
        "concurrency=1,2",
        "--gate",
        "--allow-busy-host",
        "--out",
        "sweeps/block",
    ];
    let o = xtask(r.path(), &args);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("error: the gate failed for stage 1/2 concurrency=1 (run sweep-"), "{e}");
    assert!(e.contains("; stage 2/2 concurrency=2 (run sweep-"), "{e}");
    assert!(out.contains("gate FAILED"), "{out}");
    // The sweep was written before the gate judged it.
    assert!(r.path().join("sweeps/block/sweep.json").exists());
}

/// An engine-mode profile with seeded run-to-run noise: each trial draws its own seed.
const NOISY: &str = "[profile.noisy.sim]\nmode = \"engine\"\nengine_config = \"configs/engine.toml\"\n[profile.noisy.sim.noise]\nrun_cv = 0.05\nstep_cv = 0.1\n\
    [profile.noisy.workload]\ninput_lengths = [64]\nrepeats = 8\nmax_tokens = 8\n\
    [profile.noisy.load]\nconcurrency = 4\nwarmup_requests = 0\n";

/// A repository with the [`NOISY`] profile and the engine config it simulates.
fn noisy_repo() -> tempfile::TempDir {
    let r = repo(NOISY);
    let engine = "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 4096\n\
        [device]\nname = \"H100-SXM-80GB\"\nprice_per_hour = 2.0\n";
    std::fs::write(r.path().join("configs/engine.toml"), engine).unwrap();
    r
}

#[test]
fn bench_trials_writes_a_trial_set_with_distinct_seeds_and_estimates() {
    let r = noisy_repo();
    let o = xtask(r.path(), &["bench", "-q", "-p", "noisy", "--trials", "3", "--out", "set"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    let dir = r.path().join("set");
    let index = infergate_model::trials::TrialsFile::read(&dir).unwrap();
    assert_eq!((index.planned, index.trials.len(), index.confidence), (3, 3, 0.95));
    let request = index.request.as_ref().unwrap();
    let keys: Vec<&str> = request.overrides.iter().map(|o| o.key.as_str()).collect();
    assert_eq!((&request.config, keys, request.profile.trials), (&None, vec!["trials"], Some(3)));
    let mut seeds = Vec::new();
    for (i, t) in index.trials.iter().enumerate() {
        assert_eq!(t.dir, format!("trial-0{}", i + 1));
        let s = infergate_model::Summary::read(&dir.join(&t.dir)).unwrap();
        assert_eq!((s.requests.ok, s.run_id.as_str()), (8, t.run_id.as_str()));
        assert!(s.environment.noise.is_some(), "every run records the host's noise");
        seeds.push(s.config.profile().unwrap().sim.noise.seed);
    }
    seeds.dedup();
    assert_eq!(seeds.len(), 3, "each trial draws its own seed: {seeds:?}");
    // The default metrics, each with its t interval across the three trials.
    for m in infergate_model::trials::default_metrics() {
        assert!(index.metrics.contains_key(m.as_str()), "{m}");
    }
    let tpot = &index.metrics["metrics.tpot_ms.mean"];
    assert_eq!(tpot.per_trial.len(), 3);
    let e = tpot.estimate.as_ref().unwrap();
    assert_eq!(
        (e.method, e.trials, e.requests),
        (infergate_model::stats::Method::TInterval, 3, 24)
    );
    assert!(e.lo < e.value && e.value < e.hi, "{e}");
    // P99 from 8 requests a trial is marked, in the file and on the console.
    assert!(index.metrics["metrics.ttft_ms.p99"].estimate.as_ref().unwrap().undersampled);
    assert!(out.contains("3 trials, 24 requests, t_interval, UNDERSAMPLED"), "{out}");
    assert!(out.contains("Estimate [95% CI]"), "{out}");
    // A set directory is never measured into twice.
    let o = xtask(r.path(), &["bench", "-q", "-p", "noisy", "--trials", "2", "--out", "set"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("already holds a trial set"), "{}", stderr(&o));
    // The profile key: `trials = 2` measures a set of two; 0 is refused with its key.
    std::fs::write(
        r.path().join("configs/bench.toml"),
        std::fs::read_to_string(r.path().join("configs/bench.toml")).unwrap()
            + "[profile.two]\ninherits = \"noisy\"\ntrials = 2\n[profile.none]\ntrials = 0\n",
    )
    .unwrap();
    let o = xtask(r.path(), &["bench", "-q", "-p", "two", "--out", "two"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        infergate_model::trials::TrialsFile::read(&r.path().join("two")).unwrap().trials.len(),
        2
    );
    let o = xtask(r.path(), &["bench", "-q", "-p", "none"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("trials") && stderr(&o).contains("1..=1000"), "{}", stderr(&o));
    // Trials and a sweep do not go together; 0 trials is refused.
    let o = xtask(r.path(), &["bench", "-q", "--trials", "2", "--sweep", "concurrency=1,2"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = xtask(r.path(), &["bench", "-q", "--trials", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("within 1..=1000"), "{}", stderr(&o));
}

/// `bench trials SET --until-decided` adds trials with the recorded settings, each look at the Bonferroni
/// confidence, and says how many it used; a limit at the set's own mean stays undecided.
#[test]
fn until_decided_adds_trials_up_to_the_maximum_and_reports_them() {
    let r = noisy_repo();
    let o = xtask(r.path(), &["bench", "-q", "-p", "noisy", "--trials", "2", "--out", "set"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let dir = r.path().join("set");
    let index = infergate_model::trials::TrialsFile::read(&dir).unwrap();
    let mean = index.metrics["metrics.tpot_ms.mean"].estimate.as_ref().unwrap().value;
    let write = |limit: f64| {
        std::fs::create_dir_all(r.path().join("thresholds")).unwrap();
        let text = format!(
            "version = 1\n\n[[threshold]]\nmetric = \"metrics.tpot_ms.mean\"\ncomparator = \"<=\"\n\
             limit = {limit:?}\nunit = \"ms\"\naction = \"block\"\nadr = 1\n\
             file = \"docs/adr/0001-x.md\"\nline = 9\n"
        );
        std::fs::write(r.path().join("thresholds/gate.toml"), text).unwrap();
    };
    // A limit at the measured mean: no interval can leave it; 4 trials at most.
    write(mean);
    let o = xtask(
        r.path(),
        &["bench", "trials", "set", "--allow-busy-host", "--until-decided", "--max-trials", "4"],
    );
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(3), "{out}{}", stderr(&o));
    assert!(
        out.contains("until decided: still inconclusive after 4 trials (3 of at most 3 looks, each at 98.3333% confidence"),
        "{out}"
    );
    let index = infergate_model::trials::TrialsFile::read(&dir).unwrap();
    assert_eq!(index.trials.len(), 4);
    assert_eq!(index.trials[3].dir, "trial-04");
    // A far limit is decided at the first look.
    write(mean * 10.0);
    let o = xtask(
        r.path(),
        &["bench", "trials", "set", "--allow-busy-host", "--until-decided", "--max-trials", "6"],
    );
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("until decided: decided after 4 trials (1 of at most 3 looks"), "{out}");
    // The working tree's engine config changed since: no trial is added to the set.
    let engine = r.path().join("configs/engine.toml");
    let text = std::fs::read_to_string(&engine).unwrap();
    std::fs::write(&engine, text.replace("max_model_len = 4096", "max_model_len = 2048")).unwrap();
    let o = xtask(
        r.path(),
        &["bench", "trials", "set", "--allow-busy-host", "--until-decided", "--max-trials", "6"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("engine config engine.max_model_len is 2048 now, 4096 in its trials"),
        "{}",
        stderr(&o)
    );
    assert_eq!(infergate_model::trials::TrialsFile::read(&dir).unwrap().trials.len(), 4);
    std::fs::write(&engine, text).unwrap();
    // bench --gate --trials --until-decided in one step.
    let args = [
        "bench",
        "-q",
        "-p",
        "noisy",
        "--trials",
        "2",
        "--gate",
        "--allow-busy-host",
        "--until-decided",
        "--max-trials",
        "3",
        "--out",
        "one",
    ];
    let o = xtask(r.path(), &args);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("until decided: decided after 2 trials"), "{out}");
    assert!(out.contains("gate passed"), "{out}");
}

/// A trial set measured with trace replay flags gets more trials from `bench trials SET
/// --until-decided` with the same replay settings: the trace, its time scale, start and
/// duration are part of the request `trials.json` records.
#[test]
fn until_decided_adds_trials_with_the_sets_trace_replay_settings() {
    let r = noisy_repo();
    let records: String = (0..8)
        .map(|i| {
            format!(
                "{{\"timestamp\": {}, \"input_length\": 64, \"output_length\": 8, \"hash_ids\": [{i}]}}\n",
                i * 40
            )
        })
        .collect();
    std::fs::create_dir_all(r.path().join("traces")).unwrap();
    std::fs::write(r.path().join("traces/t.jsonl"), records).unwrap();
    let replay = ["--trace", "traces/t.jsonl", "--time-scale", "0.5", "--trace-start", "0.1"];
    let args = [&["bench", "-q", "-p", "noisy"][..], &replay, &["--trace-duration", "0.3"]];
    let args = [&args.concat()[..], &["--trials", "2", "--out", "set"]].concat();
    let o = xtask(r.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let dir = r.path().join("set");
    let index = infergate_model::trials::TrialsFile::read(&dir).unwrap();
    let load = &index.request.as_ref().unwrap().profile.load;
    assert_eq!(load.mode, infergate_model::config::LoadMode::Trace);
    assert_eq!((load.time_scale, load.trace_start_s, load.trace_duration_s), (0.5, 0.1, Some(0.3)));
    // A limit at the set's own mean: undecided, so a third trial is measured.
    let mean = index.metrics["metrics.tpot_ms.mean"].estimate.as_ref().unwrap().value;
    std::fs::create_dir_all(r.path().join("thresholds")).unwrap();
    let text = format!(
        "version = 1\n\n[[threshold]]\nmetric = \"metrics.tpot_ms.mean\"\ncomparator = \"<=\"\n\
         limit = {mean:?}\nunit = \"ms\"\naction = \"block\"\nadr = 1\n\
         file = \"docs/adr/0001-x.md\"\nline = 9\n"
    );
    std::fs::write(r.path().join("thresholds/gate.toml"), text).unwrap();
    let o = xtask(
        r.path(),
        &["bench", "trials", "set", "--allow-busy-host", "--until-decided", "--max-trials", "3"],
    );
    assert_eq!(o.status.code(), Some(3), "{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    let index = infergate_model::trials::TrialsFile::read(&dir).unwrap();
    assert_eq!(index.trials.len(), 3);
    let summary = |t: &str| infergate_model::Summary::read(&dir.join(t)).unwrap();
    let (first, added) = (summary("trial-01"), summary("trial-03"));
    let replayed = added.config.profile().unwrap();
    assert_eq!(replayed.load, first.config.profile().unwrap().load);
    assert_eq!(replayed.load.mode, infergate_model::config::LoadMode::Trace);
    assert_eq!((replayed.load.time_scale, replayed.load.trace_duration_s), (0.5, Some(0.3)));
    assert_eq!(replayed.workload.trace.as_deref(), Some("traces/t.jsonl"));
    assert_eq!(added.requests.total, first.requests.total);
}

/// Ctrl-C between two trials (in the cooldown) ends the set with exit 130; trials.json lists
/// the finished trial.
#[test]
fn ctrl_c_in_a_trial_set_keeps_the_finished_trials_and_exits_130() {
    let r = repo("");
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("-C")
        .arg(r.path())
        .args(["bench", "-q", "--trials", "3", "--cooldown", "60", "--out", "set"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Lines::of(child.stderr.take().unwrap());
    let mut child = crate::support::Reaped(child);
    // Once the first trial is in trials.json, interrupt the cooldown.
    let dir = r.path().join("set");
    let first_done =
        || infergate_model::trials::TrialsFile::read(&dir).is_ok_and(|i| i.trials.len() == 1);
    if poll_for(Duration::from_secs(30), || first_done().then_some(())).is_none() {
        let _ = child.0.kill();
        let index = std::fs::read_to_string(dir.join("trials.json"));
        panic!("no trial in trials.json after 30 s: {index:?}\n{}", stderr.all());
    }
    let status = interrupt_between_runs(&mut child.0);
    assert_eq!(status.code(), Some(130), "{}", stderr.all());
    let index = infergate_model::trials::TrialsFile::read(&dir).unwrap();
    assert_eq!(index.trials.len(), 1);
    assert_eq!(index.planned, 3);
    assert!(index.notes.iter().any(|n| n.contains("cooldown before trial 2")), "{:?}", index.notes);
    // The one trial's estimates are there, from its requests.
    let e = index.metrics["metrics.ttft_ms.mean"].estimate.as_ref().unwrap();
    assert_eq!(e.method, infergate_model::stats::Method::RequestBootstrap);
    assert!(!dir.join("trial-02").exists());
}

/// A repository whose default profile runs the engine simulator with 4 sequences at most: a
/// server with a capacity.
fn engine_repo() -> tempfile::TempDir {
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
        "[profile.default.sim]\nmode = \"engine\"\nengine_config = \"configs/engine-small.toml\"\n\
         [profile.default.workload]\ninput_lengths = [64]\nrepeats = 8\nmax_tokens = 32\nignore_eos = true\n\
         [profile.default.load]\nconcurrency = 4\nduration_s = 50.0\n\
         [profile.default.client]\ngrace_s = 1.0\n\
         [profile.default.steady]\noversaturation_s = 2.0\n",
    )
    .unwrap();
    dir
}

#[test]
fn an_open_loop_at_twice_the_capacity_is_stopped_early_and_exits_6() {
    let r = engine_repo();
    // The capacity: a closed loop of as many clients as the engine runs sequences.
    let o = xtask(r.path(), &["bench", "--set", "load.requests=40", "--out", "runs/capacity"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The report shows the plateau beside the whole window (this 3 s run has none: too short).
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(report.contains("none: the steady part lasted"), "{report}");
    let capacity = infergate_model::Summary::read(&r.path().join("runs/capacity"))
        .unwrap()
        .throughput
        .requests_per_s
        .expect("measured");
    let rate = format!("load.rate={:.3}", 2.0 * capacity);
    let started = Instant::now();
    let o = xtask(
        r.path(),
        &["bench", "-q", "--set", "load.mode=open", "--set", &rate, "--out", "runs/over"],
    );
    let took = started.elapsed();
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    assert!(stderr(&o).contains("over-saturated"), "{}", stderr(&o));
    // Stopped within seconds, far from the 50 s the profile asked for.
    assert!(took < Duration::from_secs(30), "{took:?}");
    let s = infergate_model::Summary::read(&r.path().join("runs/over")).unwrap();
    assert_eq!(s.status, infergate_model::summary::RunStatus::Oversaturated);
    let note = s.notes.iter().find(|n| n.contains("over-saturated")).expect("the note");
    assert!(note.contains("stopped early"), "{note}");
    assert!(s.timing.window.duration_s.unwrap() < 20.0, "{:?}", s.timing.window);
    eprintln!("capacity {capacity} requests/s; at twice it: {note} ({took:?})");
    // At half the capacity the loop is not stopped.
    let rate = format!("load.rate={:.3}", 0.5 * capacity);
    let under = [
        "bench",
        "-q",
        "--set",
        "load.mode=open",
        "--set",
        "load.arrival=constant",
        "--set",
        &rate,
        "--set",
        "load.duration_s=8",
        "--out",
        "runs/under",
    ];
    let o = xtask(r.path(), &under);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = infergate_model::Summary::read(&r.path().join("runs/under")).unwrap();
    assert_eq!(s.status, infergate_model::summary::RunStatus::Complete, "{:?}", s.notes);
}

/// A sweep whose stages are all past the capacity (13 requests/s): each stage is stopped early
/// and says so in its summary, and the next stage still runs.
#[test]
fn every_over_saturated_stage_of_a_sweep_is_measured_and_stopped_early() {
    let r = engine_repo();
    let args = ["bench", "-q", "--sweep", "rate=40,50", "--requests", "300", "--out", "runs/sw"];
    let o = xtask(r.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let sweep = infergate_model::sweep::SweepSummary::read(&r.path().join("runs/sw")).unwrap();
    assert_eq!(sweep.stages.len(), 2, "{:?}", sweep.notes);
    for st in &sweep.stages {
        assert_eq!(st.status, infergate_model::summary::RunStatus::Oversaturated, "{st:?}");
        let s = infergate_model::Summary::read(&r.path().join("runs/sw").join(&st.dir)).unwrap();
        // 300 measured requests after 150 of warmup were scheduled.
        let sent = s.requests.total + s.requests.warmup;
        assert!(sent < 450, "stage {}: {sent} requests sent", st.stage);
    }
}

#[test]
fn steady_gate_makes_the_gate_read_the_plateaus_figures() {
    // A cold start of 4 s from the preflight: the first requests of the load take 200 ms to
    // their first token, the rest 20 ms.
    let r = repo("duration_s = 10.0\n[profile.default.steady]\nmin_s = 2.0\n");
    write_thresholds(r.path(), 100.0);
    let cold = [
        "--set",
        "sim.timing.ttft_ms=20",
        "--set",
        "sim.timing.cold_s=4",
        "--set",
        "sim.timing.cold_factor=10",
    ];
    let args = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut a = vec!["bench", "-q", "--gate", "--allow-busy-host"];
        a.extend(cold);
        a.extend(extra);
        a
    };
    let o = xtask(r.path(), &args(&["--out", "runs/whole"]));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "the whole window's P99 holds the ramp: {out}");
    let whole = infergate_model::Summary::read(&r.path().join("runs/whole")).unwrap();
    assert!(whole.metrics.ttft_ms.as_ref().unwrap().p99 >= 200.0);
    let o = xtask(r.path(), &args(&["--set", "steady.gate=true", "--out", "runs/plateau"]));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("the thresholds read the run's plateau figures"), "{out}");
    let s = infergate_model::Summary::read(&r.path().join("runs/plateau")).unwrap();
    assert!(s.gates_on_plateau());
    assert!(
        s.metric(infergate_model::metric::MetricPath::named("plateau.metrics.ttft_ms.p99"))
            .unwrap()
            < 100.0,
        "{:?}",
        s.plateau
    );
    assert_eq!(
        s.gated_metric(infergate_model::metric::MetricPath::named("metrics.ttft_ms.p99")),
        s.metric(infergate_model::metric::MetricPath::named("plateau.metrics.ttft_ms.p99"))
    );
}
