//! Warmup trials (`--warmup-trials`, `load.warmup_trials`) and the cold-start note of a trial
//! set: what `bench` writes, what `bench trials SET --until-decided` adds, and what `adr new` says.

use std::path::Path;

use crate::support::{Out, engine_params, summary, write_set, xtask};

/// A set `dir/name` whose trials have these TTFT P99 values (TPOT P99 40 ms in each).
fn set_of(dir: &Path, name: &str, ttft_p99: &[f64]) {
    let summaries: Vec<_> = ttft_p99
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            summary(&format!("{name}-t{:02}", i + 1), p, 40.0, 0.95, engine_params(true, 8192))
        })
        .collect();
    write_set(&dir.join(name), &summaries);
}

fn record(root: &Path, base: &str, exp: &str) -> (Out, String) {
    let o = xtask(root, &["adr", "new", "Warm", "--baseline", base, "--exp", exp]);
    let text = std::fs::read_to_string(root.join("docs/adr/0001-warm.md")).unwrap_or_default();
    (o, text)
}

#[test]
fn adr_new_notes_a_cold_first_trial_next_to_its_row_and_keeps_its_estimates() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    // The walkthrough's llama.cpp set: trial 1 at 1214 ms, the others near 190.
    set_of(&runs, "base", &[1214.0, 196.0, 188.0, 201.0]);
    set_of(&runs, "exp", &[100.0, 102.0, 98.0]);
    let (o, text) = record(tmp.path(), "runs/base", "runs/exp");
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(
        text.contains(
            "> **Cold start:** Baseline: trial 1 looks like a cold start: TTFT P99 1214 ms \
             against a median of 196 ms of the others"
        ),
        "{text}"
    );
    assert!(
        text.contains("rerun with --warmup-trials 1. Its estimates include that trial"),
        "{text}"
    );
    assert!(!text.contains("Exp-1: trial 1 looks like a cold start"), "{text}");
    // The estimate is not changed: the mean of the four trials, 449.75, shown to the precision
    // of its half-width (±630 with the cold trial in).
    assert!(text.contains("| Baseline | 320 (4 trials) | 450 ± 630* |"), "{text}");

    // Sets without a cold start say nothing of it.
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    set_of(&runs, "base", &[200.0, 210.0, 190.0]);
    set_of(&runs, "exp", &[130.0, 102.0, 98.0]);
    let (o, text) = record(tmp.path(), "runs/base", "runs/exp");
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(!text.contains("Cold start"), "{text}");
}

/// An engine-mode profile with seeded noise, 8 requests a trial.
#[cfg(feature = "runtime")]
const NOISY: &str = "[profile.noisy.sim]\nmode = \"engine\"\nengine_config = \"configs/engine.toml\"\n\
    [profile.noisy.sim.noise]\nrun_cv = 0.05\nstep_cv = 0.1\n\
    [profile.noisy.workload]\ninput_lengths = [64]\nrepeats = 8\nmax_tokens = 8\n\
    [profile.noisy.load]\nconcurrency = 4\nwarmup_requests = 0\n\
    [profile.warm]\ninherits = \"noisy\"\n[profile.warm.load]\nwarmup_trials = 1\n";

#[cfg(feature = "runtime")]
fn noisy_repo() -> tempfile::TempDir {
    let r = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(r.path().join("configs")).unwrap();
    std::fs::write(r.path().join("configs/bench.toml"), NOISY).unwrap();
    let engine = "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 4096\n\
        [device]\nname = \"H100-SXM-80GB\"\nprice_per_hour = 2.0\n";
    std::fs::write(r.path().join("configs/engine.toml"), engine).unwrap();
    r
}

#[cfg(feature = "runtime")]
fn seed(dir: &Path) -> u64 {
    let s = infergate_model::Summary::read(dir).unwrap();
    s.config.profile().unwrap().sim.noise.seed
}

#[cfg(feature = "runtime")]
#[test]
fn warmup_trials_run_first_are_listed_and_never_estimated_or_repeated_by_until_decided() {
    let r = noisy_repo();
    let args = ["bench", "-p", "noisy", "--trials", "2", "--warmup-trials", "1", "--out", "set"];
    let o = xtask(r.path(), &args);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let dir = r.path().join("set");
    let index = infergate_model::trials::TrialsFile::read(&dir).unwrap();
    let request = index.request.as_ref().unwrap();
    let keys: Vec<&str> = request.overrides.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(keys, ["trials", "load.warmup_trials"]);
    assert_eq!((request.profile.trials, request.profile.load.warmup_trials), (Some(2), 1));
    // The warmup trial: its own run directory, run id and seed, listed with its headline.
    assert_eq!(index.warmup.len(), 1);
    let w = &index.warmup[0];
    assert_eq!((w.dir.as_str(), w.requests, w.ok), ("warmup-01", 8, 8));
    assert!(w.run_id.ends_with("-w01"), "{}", w.run_id);
    let ws = infergate_model::Summary::read(&dir.join("warmup-01")).unwrap();
    let keys: Vec<&str> = w.headline.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "error_rate",
            "metrics.e2e_ms.p99",
            "metrics.tpot_ms.p99",
            "metrics.ttft_ms.p99",
            "throughput.output_tokens_per_s"
        ]
    );
    assert_eq!(
        w.headline["metrics.ttft_ms.p99"],
        ws.metric(infergate_model::metric::MetricPath::named("metrics.ttft_ms.p99"))
    );
    // Each run's scenario is that of a plain trial: the set, not the run, has warmup trials.
    assert_eq!(ws.config.profile().unwrap().load.warmup_trials, 0);
    assert!(o.stderr.contains("warmup trial 1: 8 requests, 8 ok, TTFT P99 "), "{}", o.stderr);
    assert!(o.stderr.contains("(not part of the estimates)"), "{}", o.stderr);
    // The estimates are the two trials' values alone.
    assert_eq!(index.trials.len(), 2);
    let ttft = &index.metrics["metrics.ttft_ms.mean"];
    let trials: Vec<Option<f64>> = ["trial-01", "trial-02"]
        .iter()
        .map(|t| {
            infergate_model::Summary::read(&dir.join(t))
                .unwrap()
                .metric(infergate_model::metric::MetricPath::named("metrics.ttft_ms.mean"))
        })
        .collect();
    assert_eq!(ttft.per_trial, trials);
    assert_eq!(ttft.estimate.as_ref().unwrap().trials, 2);
    let seeds =
        [seed(&dir.join("warmup-01")), seed(&dir.join("trial-01")), seed(&dir.join("trial-02"))];
    assert!(seeds[0] != seeds[1] && seeds[0] != seeds[2], "{seeds:?}");

    // bench trials SET --until-decided adds trials to the warm engine's set: no second warmup. A limit at
    // the set's own mean cannot be decided, so it measures up to the maximum.
    let mean = index.metrics["metrics.tpot_ms.mean"].estimate.as_ref().unwrap().value;
    std::fs::create_dir_all(r.path().join("thresholds")).unwrap();
    std::fs::write(
        r.path().join("thresholds/gate.toml"),
        format!(
            "version = 1\n\n[[threshold]]\nmetric = \"metrics.tpot_ms.mean\"\ncomparator = \"<=\"\n\
             limit = {mean:?}\nunit = \"ms\"\naction = \"block\"\nadr = 1\n\
             file = \"docs/adr/0001-x.md\"\nline = 9\n"
        ),
    )
    .unwrap();
    let o = xtask(r.path(), &["bench", "trials", "set", "--until-decided", "--max-trials", "3"]);
    assert_eq!(o.code, 3, "{}{}", o.stdout, o.stderr);
    let index = infergate_model::trials::TrialsFile::read(&dir).unwrap();
    assert_eq!((index.warmup.len(), index.trials.len()), (1, 3));
    assert!(dir.join("trial-03/summary.json").is_file());
    assert!(!dir.join("warmup-02").exists());
    std::fs::remove_file(r.path().join("thresholds/gate.toml")).unwrap();

    // The profile key: `load.warmup_trials = 1` makes one run a set of one trial after a
    // warmup trial.
    let o = xtask(r.path(), &["bench", "-q", "-p", "warm", "--out", "warm"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let index = infergate_model::trials::TrialsFile::read(&r.path().join("warm")).unwrap();
    assert_eq!((index.warmup.len(), index.trials.len()), (1, 1));
    assert!(r.path().join("warm/warmup-01/summary.json").is_file());

    // Refused: too many, and with a sweep.
    let o = xtask(r.path(), &["bench", "-q", "-p", "noisy", "--warmup-trials", "1001"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("warmup trials within 0..=1000, got `1001`"), "{}", o.stderr);
    let o = xtask(r.path(), &["bench", "-q", "--warmup-trials", "1", "--sweep", "concurrency=1,2"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    let o = xtask(r.path(), &["bench", "-q", "-p", "noisy", "--set", "load.warmup_trials=-1"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("load.warmup_trials"), "{}", o.stderr);
}

#[test]
fn gate_notes_a_cold_first_trial_under_its_report() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("thresholds")).unwrap();
    std::fs::write(
        tmp.path().join("thresholds/gate.toml"),
        "version = 1\n\n[[threshold]]\nmetric = \"metrics.ttft_ms.p99\"\ncomparator = \"<=\"\n\
         limit = 300.0\nunit = \"ms\"\naction = \"block\"\nadr = 1\n\
         file = \"docs/adr/0001-x.md\"\nline = 9\n",
    )
    .unwrap();
    set_of(tmp.path(), "cold", &[1214.0, 196.0, 188.0, 201.0]);
    set_of(tmp.path(), "warm", &[196.0, 188.0, 201.0]);
    // TTFT P99 449.75 ± 810.7: the cold trial leaves 300 ms undecided.
    let o = xtask(tmp.path(), &["gate", "cold"]);
    assert_eq!(o.code, 3, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains(
            "note: trial 1 looks like a cold start: TTFT P99 1214 ms against a median of 196 ms \
             of the others; rerun with --warmup-trials 1"
        ),
        "{}",
        o.stderr
    );
    // The warm trials alone: 195 ± 16.3, a pass, and no note.
    let o = xtask(tmp.path(), &["gate", "warm"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(!o.stderr.contains("cold start"), "{}", o.stderr);
}
