//! `cargo xtask tune` against the embedded simulator: the known answer of a 3x2 grid (the
//! engine model in virtual time predicts the best configuration), resume after Ctrl-C, the
//! record `adr new --tune` writes from it, and `--apply`.

use std::path::Path;
use std::time::{Duration, Instant};

use infergate_model::config::{EngineConfig, Source};
use infergate_model::stats::Method;
use infergate_sim::engine::EngineSpec;
use infergate_sim::engine::{Load, SimRequest, simulate};
use xtask::tune::grid::{self, Variant};
use xtask::tune::model::{DecidedBy, RowStatus, SloCompliance};
use xtask::tune::{TuneFile, TuneRow};

use crate::support::{copy_of_configs, new_record, wait_until, xtask, xtask_command};

/// A short closed-loop load: 8 clients, 16 requests of 64 prompt and 16 output tokens.
const LOAD: [&str; 10] = [
    "--concurrency",
    "8",
    "--requests",
    "16",
    "--max-tokens",
    "16",
    "--set",
    "load.warmup_requests=0",
    "--set",
    "workload.input_lengths=[64]",
];

fn tune_args<'a>(out: &'a str, grid: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["tune", "--out", out];
    for g in grid {
        a.extend(["--grid", g]);
    }
    a.extend(LOAD);
    a
}

/// Output tokens per second of `variant` of `configs/engine.toml` under [`LOAD`], in virtual
/// time: the engine model's prediction, independent of the tune.
fn predicted_throughput(root: &Path, v: &Variant) -> f64 {
    let base = Source::read(&root.join("configs/engine.toml")).unwrap();
    let text = grid::variant_text(&base, v).unwrap();
    let cfg = EngineConfig::from_source(&Source::new("v.toml", text)).unwrap();
    let spec = EngineSpec::new(&cfg).unwrap();
    let requests = (0..16).map(|_| SimRequest::new(0.0, 64, 16)).collect();
    simulate(&spec, Load::Closed { concurrency: 8, requests }).output_tokens_per_s()
}

fn setting<'a>(r: &'a TuneRow, key: &str) -> &'a serde_json::Value {
    &r.settings.iter().find(|(k, _)| k == key).unwrap().1
}

#[test]
fn a_3x2_grid_finds_the_configuration_the_engine_model_predicts() {
    let root = copy_of_configs();
    let grid_specs =
        ["scheduler.max_num_seqs=1,2,8", "scheduler.enable_chunked_prefill=false,true"];
    let started = Instant::now();
    let o = xtask(root.path(), &tune_args("runs/tune", &grid_specs));
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(started.elapsed() < Duration::from_secs(120), "{:?}", started.elapsed());
    let tune = TuneFile::read(&root.path().join("runs/tune")).unwrap();
    assert_eq!(tune.rows.len(), 6);
    assert!(tune.rows.iter().all(|r| r.status == RowStatus::Measured), "{:?}", tune.rows);
    assert_eq!(tune.rows[0].name, "max_num_seqs=1 enable_chunked_prefill=false");

    // The prediction, configuration by configuration, in virtual time.
    let spec = grid::TuneSpec {
        axes: grid_specs.iter().map(|g| grid::parse_axis(g).unwrap()).collect(),
        variants: vec![],
    };
    let predicted: Vec<f64> =
        grid::expand(&spec).iter().map(|v| predicted_throughput(root.path(), v)).collect();
    let best = (0..6).max_by(|&a, &b| predicted[a].total_cmp(&predicted[b])).unwrap();
    let winner = tune.winner_row().expect("every configuration meets the default SLOs");
    assert_eq!(
        setting(winner, "scheduler.max_num_seqs"),
        setting(&tune.rows[best], "scheduler.max_num_seqs"),
        "predicted {predicted:?}, measured {:?}",
        tune.rows.iter().map(|r| r.output_tokens_per_s).collect::<Vec<_>>()
    );
    // More sequences per step: more throughput, as the model predicts, for both prefill modes.
    for chunked in [0, 1] {
        let t: Vec<f64> =
            [0, 2, 4].iter().map(|i| tune.rows[i + chunked].output_tokens_per_s.unwrap()).collect();
        assert!(t[0] < t[1] && t[1] < t[2], "{t:?}");
        assert!(
            predicted[chunked] < predicted[2 + chunked]
                && predicted[2 + chunked] < predicted[4 + chunked]
        );
    }
    // 8 is the largest value tried: the winner sits at the edge of the grid.
    assert!(
        tune.warnings
            .iter()
            .any(|w| w.contains("largest value tried for scheduler.max_num_seqs (8)")),
        "{:?}",
        tune.warnings
    );
    assert!(
        o.stdout.contains("(winner)") && o.stdout.contains("winner: max_num_seqs=8"),
        "{}",
        o.stdout
    );
    // Each run records the variant, the governed file and its changes.
    let s =
        infergate_model::Summary::read(&root.path().join("runs/tune").join(&winner.dir)).unwrap();
    let e = s.engine.unwrap();
    assert_eq!(e.derived_from.as_deref(), Some("configs/engine.toml"));
    assert_eq!(e.file, format!("runs/tune/engine-{}.toml", winner.dir));
    let front: Vec<&str> = tune.rows.iter().filter(|r| r.pareto).map(|r| r.name.as_str()).collect();
    assert!(!front.is_empty());
    let svg = std::fs::read_to_string(root.path().join("runs/tune/pareto.svg")).unwrap();
    assert!(
        svg.contains("data-chart=\"pareto-throughput\"")
            && svg.contains("data-chart=\"pareto-goodput\"")
    );
}

#[test]
fn ctrl_c_keeps_the_measured_rows_and_a_rerun_measures_only_the_missing_ones() {
    let root = copy_of_configs();
    let dir = root.path().join("runs/t");
    let args = tune_args("runs/t", &["scheduler.max_num_seqs=2,4,8"]);
    let child = xtask_command(root.path(), &args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut reaped = crate::support::Reaped(child);
    // Once the first configuration is measured, Ctrl-C.
    wait_until(Duration::from_secs(90), "a configuration measured in tune.json", || {
        TuneFile::read(&dir).is_ok_and(|t| !t.rows.is_empty())
    });
    let pid = reaped.0.id().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let code = reaped.0.wait().unwrap().code();
    let first = TuneFile::read(&dir).unwrap();
    let measured: Vec<&TuneRow> =
        first.rows.iter().filter(|r| r.status == RowStatus::Measured).collect();
    if code == Some(0) {
        // The signal came after the last configuration: nothing was left to interrupt.
        assert_eq!(measured.len(), 3);
    } else {
        assert_eq!(code, Some(130));
        assert!(measured.len() < 3, "{:?}", first.rows);
    }
    let run_ids: Vec<String> = measured
        .iter()
        .map(|r| infergate_model::Summary::read(&dir.join(&r.dir)).unwrap().run_id)
        .collect();

    let o = xtask(root.path(), &args);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert_eq!(
        o.stderr.matches("measured before with the same inputs: kept").count(),
        measured.len(),
        "{}",
        o.stderr
    );
    let second = TuneFile::read(&dir).unwrap();
    assert!(second.rows.iter().all(|r| r.status == RowStatus::Measured), "{:?}", second.rows);
    for (r, id) in measured.iter().zip(&run_ids) {
        let again = infergate_model::Summary::read(&dir.join(&r.dir)).unwrap();
        assert_eq!(&again.run_id, id, "{} was measured again", r.name);
    }
    // Other bench arguments: another key, everything measured again.
    let mut other = args.clone();
    other.extend(["--set", "workload.seed=7"]);
    let o = xtask(root.path(), &other);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!o.stderr.contains("measured before"), "{}", o.stderr);
}

#[test]
fn the_record_of_a_tune_names_every_configuration_and_adopts_the_winner() {
    let root = copy_of_configs();
    // A bad combination is a row with its error, not an abort.
    let o = xtask(root.path(), &tune_args("runs/t", &["scheduler.max_num_seqs=0,2,8"]));
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let tune = TuneFile::read(&root.path().join("runs/t")).unwrap();
    assert_eq!(tune.rows[0].status, RowStatus::Failed);
    assert!(tune.rows[0].error.as_deref().unwrap().contains("max_num_seqs"), "{:?}", tune.rows[0]);
    let winner = tune.winner.clone().unwrap();
    assert_eq!(winner, "max_num_seqs=8");

    let o = xtask(root.path(), &["adr", "new", "Batch eight sequences", "--tune", "runs/t"]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let file = new_record(root.path());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("| Baseline (max_num_seqs=2) |"), "{text}");
    assert!(text.contains("| max_num_seqs=8 |"), "{text}");
    assert!(text.contains("> Not measured: `max_num_seqs=0`: not a valid engine config"), "{text}");
    assert!(
        text.contains("> Edge of the grid: the winner `max_num_seqs=8` takes the largest value"),
        "{text}"
    );
    assert!(text.contains("(assets/0001-pareto.svg)"), "{text}");
    let pareto =
        std::fs::read_to_string(root.path().join("docs/adr/assets/0001-pareto.svg")).unwrap();
    assert!(pareto.contains("data-chart=\"pareto-throughput\""), "{pareto}");
    assert!(
        text.contains("configs/engine.toml: scheduler.max_num_seqs = 8"),
        "the decision names the winner's key in the governed file:\n{text}"
    );

    // --apply writes the winner into the governed file, and nothing else changes.
    let before = std::fs::read_to_string(root.path().join("configs/engine.toml")).unwrap();
    let mut args = tune_args("runs/t", &["scheduler.max_num_seqs=0,2,8"]);
    args.push("--apply");
    let o = xtask(root.path(), &args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let after = std::fs::read_to_string(root.path().join("configs/engine.toml")).unwrap();
    let (old, new) = (
        format!("max_num_seqs = 256{}#", " ".repeat(15)),
        format!("max_num_seqs = 8{}#", " ".repeat(17)),
    );
    assert!(before.contains(&old), "{before}");
    assert_eq!(after, before.replace(&old, &new));
}

#[test]
fn nothing_to_tune_and_unsupported_flags_are_usage_errors() {
    let root = copy_of_configs();
    let o = xtask(root.path(), &["tune"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("nothing to tune"), "{}", o.stderr);
    let o = xtask(root.path(), &["tune", "--grid", "max_num_seqs=1,2"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("dotted engine-config key"), "{}", o.stderr);
    let o = xtask(root.path(), &["tune", "--grid", "scheduler.max_num_seqs=1,2", "--gate"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("tune does not take --gate"), "{}", o.stderr);
    std::fs::write(
        root.path().join("configs/tune.toml"),
        "[tune.grid]\nscheduler.max_num_seqs = 4\n",
    )
    .unwrap();
    let o = xtask(root.path(), &["tune", "--tune-config", "configs/tune.toml"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("configs/tune.toml:2"), "{}", o.stderr);
}

#[test]
fn max_configs_a_random_search_and_the_time_budget_bound_the_tune() {
    use xtask::tune::model::Search;
    let root = copy_of_configs();
    let mut args = tune_args("runs/r", &["scheduler.max_num_seqs=2,4,8,16"]);
    args.extend(["--set", "slo.ttft_ms=60000", "--search", "random", "--seed", "3"]);
    args.extend(["--max-configs", "2"]);
    let o = xtask(root.path(), &args);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let tune = TuneFile::read(&root.path().join("runs/r")).unwrap();
    assert_eq!(tune.search, "random (seed 3)");
    let names = ["max_num_seqs=2", "max_num_seqs=4", "max_num_seqs=8", "max_num_seqs=16"];
    let sample: Vec<&str> =
        Search::Random { seed: 3 }.order(4, Some(2)).into_iter().map(|i| names[i]).collect();
    let measured: Vec<&str> = tune
        .rows
        .iter()
        .filter(|r| r.status == RowStatus::Measured)
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(measured, sample);
    let skipped: Vec<&TuneRow> =
        tune.rows.iter().filter(|r| r.status == RowStatus::Skipped).collect();
    assert_eq!(skipped.len(), 2);
    assert!(skipped.iter().all(|r| r.error.as_deref() == Some("beyond --max-configs")));
    assert!(sample.contains(&tune.winner.as_deref().unwrap()));

    // A spent time budget starts nothing: no winner, exit 1.
    let mut args = tune_args("runs/b", &["scheduler.max_num_seqs=2,4"]);
    args.extend(["--time-budget", "0"]);
    let o = xtask(root.path(), &args);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("no measured configuration meets every SLO"), "{}", o.stderr);
    let tune = TuneFile::read(&root.path().join("runs/b")).unwrap();
    assert!(tune.rows.iter().all(|r| r.status == RowStatus::Skipped
        && r.error.as_deref() == Some("the time budget was spent")));
}

/// An engine that does not start (here: one that reports running out of memory and exits) is a
/// row with its error and the end of its log; the tune goes on and ends without a winner.
#[test]
fn an_engine_that_fails_to_start_is_a_row_with_its_error() {
    use std::os::unix::fs::PermissionsExt;
    let root = copy_of_configs();
    let fake = root.path().join("fake-llama-server");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho \"ggml: out of memory allocating the KV cache\"\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let model = root.path().join("model.gguf");
    std::fs::write(&model, "not a model").unwrap();
    let model = model.display().to_string();
    let mut args = tune_args("runs/oom", &["scheduler.max_num_seqs=1,2"]);
    args.extend(["--engine", "llama-cpp", "--gguf", &model, "--ready-timeout", "20"]);
    let o = xtask_command(root.path(), &args).env("LLAMA_SERVER", &fake).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    let tune = TuneFile::read(&root.path().join("runs/oom")).unwrap();
    assert_eq!(tune.rows.len(), 2);
    for r in &tune.rows {
        assert_eq!(r.status, RowStatus::Failed, "{r:?}");
        let e = r.error.as_deref().unwrap();
        assert!(e.contains("the engine did not start") && e.contains("out of memory"), "{e}");
    }
    assert_eq!(tune.winner, None);
}

#[test]
fn successive_halving_measures_the_better_half_again_with_twice_the_requests() {
    let root = copy_of_configs();
    let mut args = tune_args("runs/h", &["scheduler.max_num_seqs=1,2,4,8"]);
    args.extend(["--set", "slo.ttft_ms=60000", "--search", "halving"]);
    let o = xtask(root.path(), &args);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let dir = root.path().join("runs/h");
    let tune = TuneFile::read(&dir).unwrap();
    assert_eq!(tune.search, "successive halving");
    // 4 configurations, 16 requests: rung 1 measures all four with 8, rung 2 the better half
    // with 16.
    assert_eq!(
        tune.rows
            .iter()
            .map(|r| (r.name.as_str(), r.rung, r.eliminated, r.requests))
            .collect::<Vec<_>>(),
        [
            ("max_num_seqs=1", Some(1), true, 8),
            ("max_num_seqs=2", Some(1), true, 8),
            ("max_num_seqs=4", Some(2), false, 16),
            ("max_num_seqs=8", Some(2), false, 16),
        ]
    );
    assert_eq!(tune.earlier.len(), 2);
    assert_eq!(tune.winner.as_deref(), Some("max_num_seqs=8"));
    assert!(
        dir.join("max_num_seqs-8.rung-1").is_dir() && dir.join("max_num_seqs-8.rung-2").is_dir()
    );
    // Resumed: every rung's runs are kept.
    let o = xtask(root.path(), &args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stderr.matches("measured before with the same inputs: kept").count(),
        6,
        "{}",
        o.stderr
    );
    // The record takes the last rung's rows and lists the eliminated ones.
    let o = xtask(root.path(), &["adr", "new", "Eight sequences", "--tune", "runs/h"]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let adr = new_record(root.path());
    let text = std::fs::read_to_string(adr).unwrap();
    assert!(text.contains("| Baseline (max_num_seqs=4) |"), "{text}");
    assert!(
        text.contains("> Eliminated by successive halving after rung 1 (8 measured requests): `max_num_seqs=1`."),
        "{text}"
    );
}

#[test]
fn with_a_sweep_each_configuration_is_its_knee() {
    let root = copy_of_configs();
    let mut args = tune_args("runs/s", &["scheduler.max_num_seqs=2,8"]);
    // --sweep replaces --concurrency.
    args.drain(5..7);
    args.extend(["--sweep", "concurrency=2,8"]);
    let o = xtask(root.path(), &args);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let dir = root.path().join("runs/s");
    let tune = TuneFile::read(&dir).unwrap();
    for r in &tune.rows {
        assert_eq!(r.status, RowStatus::Measured, "{r:?}");
        let sweep = infergate_model::sweep::SweepSummary::read(&dir.join(&r.dir)).unwrap();
        let stage = match &sweep.knee {
            Some(k) => sweep.stages.iter().find(|s| s.stage == k.stage).unwrap(),
            None => sweep.stages.last().unwrap(),
        };
        let which = if sweep.knee.is_some() { "knee" } else { "last stage, no knee" };
        assert_eq!(r.sweep_stage, Some(format!("{which}: concurrency {}", stage.load)));
        assert_eq!(r.output_tokens_per_s, stage.output_tokens_per_s, "{r:?}");
    }
    // The same command again: every sweep is complete, nothing is measured again.
    let o = xtask(root.path(), &args);
    assert_eq!(o.stderr.matches("measured before with the same inputs: kept").count(), 2);
    let mut halving = args.clone();
    halving.extend(["--search", "halving"]);
    let o = xtask(root.path(), &halving);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("choose one of them"), "{}", o.stderr);
}

#[test]
fn a_directory_the_tune_did_not_write_is_never_removed() {
    let root = copy_of_configs();
    let mine = root.path().join("runs/x/max_num_seqs-2");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "mine").unwrap();
    let o = xtask(root.path(), &tune_args("runs/x", &["scheduler.max_num_seqs=2,4"]));
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("is not a run of the tune"), "{}", o.stderr);
    assert_eq!(std::fs::read_to_string(mine.join("notes.txt")).unwrap(), "mine");
}

/// No SLO in the way: these tests are about the goodput decision.
const LOOSE_SLOS: [&str; 4] = ["--set", "slo.ttft_ms=60000", "--set", "slo.tpot_ms=60000"];

#[test]
fn a_clearly_better_configuration_is_decided_by_goodput() {
    let root = copy_of_configs();
    // 8 clients: one sequence at a time serves them one by one, eight serve them together.
    // Two trials each: the t intervals count run-to-run variance, so the difference can decide.
    let mut args = tune_args("runs/g", &["scheduler.max_num_seqs=1,8"]);
    args.extend(LOOSE_SLOS);
    args.extend(["--trials", "2"]);
    let o = xtask(root.path(), &args);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let dir = root.path().join("runs/g");
    let tune = TuneFile::read(&dir).unwrap();
    assert_eq!(tune.winner.as_deref(), Some("max_num_seqs=8"));
    assert_eq!(tune.decided_by, Some(DecidedBy::Goodput));
    assert!(tune.indistinguishable.is_empty(), "{:?}", tune.rivals);
    assert_eq!(tune.rivals.len(), 1);
    let d = tune.rivals[0].difference.as_ref().unwrap();
    assert_eq!(tune.rivals[0].name, "max_num_seqs=1");
    assert!(d.lo.unwrap() > 0.0 && !d.request_level_only, "{d:?}");
    // Each row's estimates: two trials of 16 requests, t across the trials' values.
    for r in &tune.rows {
        let g = r.estimates.goodput_rps.as_ref().unwrap();
        assert_eq!((g.trials, g.requests, g.method), (2, 32, Method::TInterval), "{r:?}");
        assert!(g.lo <= g.value && g.value <= g.hi, "{g:?}");
        let set = infergate_model::trials::TrialSet::load(&dir.join(&r.dir)).unwrap();
        let per: Vec<f64> = set
            .per_trial(infergate_model::metric::MetricPath::named("goodput.requests_per_s"))
            .into_iter()
            .flatten()
            .collect();
        assert!((g.value - (per[0] + per[1]) / 2.0).abs() < 1e-9, "{g:?} {per:?}");
        assert!((r.goodput_rps.unwrap() - g.value).abs() < 1e-9);
        assert!(r.estimates.output_tokens_per_s.is_some() && r.estimates.ttft_p99_ms.is_some());
        assert_eq!(r.slo, Some(SloCompliance::Meets));
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("tune.json")).unwrap()).unwrap();
    assert_eq!(json["decided_by"], "goodput");
    assert_eq!(json["rows"][0]["estimates"]["goodput_rps"]["method"], "t_interval");
    assert!(o.stdout.contains("trials × requests") && o.stdout.contains("2 × 16"), "{}", o.stdout);
    assert!(o.stdout.contains(" ± "), "{}", o.stdout);
    let line = o.stdout.lines().find(|l| l.starts_with("winner: ")).unwrap();
    assert!(
        line.starts_with("winner: max_num_seqs=8 (goodput ")
            && line.contains("significantly better in goodput than max_num_seqs=1 (differences [")
            && line.ends_with("req/s): decided by goodput"),
        "{line}"
    );
}

#[test]
fn configurations_the_engine_treats_alike_are_chosen_by_the_tie_break() {
    let root = copy_of_configs();
    // The same value twice under two names: any difference is noise. One run each: the
    // request-level intervals leave run-to-run variance out and cannot decide.
    std::fs::write(
        root.path().join("configs/tune.toml"),
        "[tune.variants.first]\nscheduler.max_num_seqs = 8\n\n\
         [tune.variants.second]\nscheduler.max_num_seqs = 8\n",
    )
    .unwrap();
    let mut args = vec!["tune", "--out", "runs/same", "--tune-config", "configs/tune.toml"];
    args.extend(LOAD);
    args.extend(LOOSE_SLOS);
    let o = xtask(root.path(), &args);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let tune = TuneFile::read(&root.path().join("runs/same")).unwrap();
    assert_eq!(tune.decided_by, Some(DecidedBy::TieBreak), "{:?}", tune.rivals);
    let winner = tune.winner.clone().unwrap();
    let other = if winner == "first" { "second" } else { "first" };
    assert_eq!(tune.indistinguishable, [other]);
    assert!(tune.rivals[0].difference.as_ref().unwrap().request_level_only, "{:?}", tune.rivals);
    assert!(tune.tie_break.is_some());
    assert!(o.stdout.contains(" ± ") && o.stdout.contains("~") && o.stdout.contains("1 × 16"));
    let line = o.stdout.lines().find(|l| l.starts_with("winner: ")).unwrap();
    assert!(
        line.starts_with(&format!("winner: {winner} (goodput "))
            && line.contains(&format!("; not significantly better than {other} (differences ["))
            && line
                .contains("~: one run each, a request-level interval leaves run-to-run variance")
            && line.contains("): chosen by the tie-break (")
            && line.ends_with("; run with --trials 3 to decide"),
        "{line}"
    );

    // The record says the tie-break chose.
    let o = xtask(root.path(), &["adr", "new", "Eight sequences", "--tune", "runs/same"]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let adr = new_record(root.path());
    let text = std::fs::read_to_string(adr).unwrap();
    let record_line = text.lines().find(|l| l.starts_with("> Winner: ")).expect(&text);
    assert!(
        record_line.contains(&format!("not significantly better than {other}"))
            && record_line.contains("chosen by the tie-break")
            && record_line.contains("\\~"),
        "{record_line}"
    );
}

/// Peak resident memory (KiB) of a child while it runs, polled from `/proc` until it exits
/// (`VmHWM` only grows, so the last reading is the peak so far).
fn peak_rss_kib(mut child: std::process::Child) -> (std::process::ExitStatus, u64) {
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        if let Ok(text) = std::fs::read_to_string(&status_file) {
            let hwm = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            peak = peak.max(hwm.unwrap_or(0));
        }
        if let Some(status) = child.try_wait().unwrap() {
            return (status, peak);
        }
        assert!(std::time::Instant::now() < deadline, "the tune did not end");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The issue's grid: 4 axes of 100 values with --max-configs 1 measures one configuration and
/// stays small (it was killed at 24.3 GB, expanding 10^8 configurations before the limit); the
/// configurations beyond it are counted, not listed; without --max-configs it is refused; a
/// grid past the documented product is refused.
#[test]
fn a_huge_grid_with_max_configs_measures_one_configuration_in_bounded_memory() {
    let root = copy_of_configs();
    let list = |from: u64, step: f64| -> String {
        (0..100).map(|i| format!("{}", from as f64 + i as f64 * step)).collect::<Vec<_>>().join(",")
    };
    let grids = [
        format!(
            "scheduler.max_num_seqs={}",
            (1..=100).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
        ),
        format!(
            "engine.gpu_memory_utilization={}",
            (0..100).map(|i| format!("0.{:03}", 500 + i * 4)).collect::<Vec<_>>().join(",")
        ),
        format!("device.price_per_hour={}", list(1, 1.0)),
        format!(
            "scheduler.max_num_batched_tokens={}",
            (8192..8292).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
        ),
    ];
    let grid_refs: Vec<&str> = grids.iter().map(String::as_str).collect();
    let mut args = tune_args("runs/huge", &grid_refs);
    args.extend(["--max-configs", "1", "--set", "slo.ttft_ms=60000"]);
    let child = xtask_command(root.path(), &args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (status, peak) = peak_rss_kib(child);
    assert!(status.success(), "{status}");
    eprintln!("tune 4 x 100 with --max-configs 1: peak RSS {} MiB", peak / 1024);
    assert!(peak < 200 * 1024, "peak RSS {peak} KiB");
    let tune = TuneFile::read(&root.path().join("runs/huge")).unwrap();
    assert_eq!(tune.rows.len(), 1, "one row: the measured configuration");
    assert_eq!(tune.beyond_max_configs, 99_999_999);
    let size = std::fs::metadata(root.path().join("runs/huge/tune.json")).unwrap().len();
    assert!(size < 1 << 20, "tune.json {size} bytes");
    // Without --max-configs: refused before anything runs.
    let o = xtask(root.path(), &tune_args("runs/all", &grid_refs));
    assert_eq!(o.code, 2, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr
            .contains("the grid has 100000000 configurations, more than a tune measures (10000)"),
        "{}",
        o.stderr
    );
    // Past the documented product, even with --max-configs.
    let mut seven = grid_refs.clone();
    let more: Vec<String> = (0..3).map(|k| format!("x{k}.y={}", list(1, 1.0))).collect();
    seven.extend(more.iter().map(String::as_str));
    let mut args = tune_args("runs/seven", &seven);
    args.extend(["--max-configs", "1"]);
    let o = xtask(root.path(), &args);
    assert_eq!(o.code, 2, "{}\n{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("more than a tune can describe (1000000000000)"), "{}", o.stderr);
    // `tune merge` is no tune command.
    let o = xtask(root.path(), &["tune", "merge", "a", "b"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(!xtask(root.path(), &["tune", "--help"]).stdout.contains("\n  merge"));
}

/// `report DIR` of a tune: a row per configuration (the winner marked), both fronts drawn.
#[test]
fn a_tune_report_lists_its_configurations_and_draws_both_fronts() {
    let root = copy_of_configs();
    let mut args = tune_args("runs/t", &["scheduler.max_num_seqs=2,8"]);
    args.extend(["--set", "slo.ttft_ms=60000"]);
    let o = xtask(root.path(), &args);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let o = xtask(root.path(), &["report", "runs/t"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let html = std::fs::read_to_string(root.path().join("runs/t/report.html")).unwrap();
    let tune = TuneFile::read(&root.path().join("runs/t")).unwrap();
    assert!(html.contains("<title>Tune: profile default</title>"), "{html}");
    for r in &tune.rows {
        assert!(html.contains(&format!(">{}", r.name)), "{} missing: {html}", r.name);
    }
    let winner = tune.winner.as_deref().expect("a winner under a loose SLO");
    assert!(html.contains(&format!(">{winner} (winner)</td>")), "{html}");
    assert!(
        html.contains("data-chart=\"pareto-throughput\"")
            && html.contains("data-chart=\"pareto-goodput\"")
    );
}

/// `tune --objective capacity`: each configuration's capacity search against its own
/// simulator, the rows ranked by their brackets: four slots carry more concurrent requests
/// under the SLO than one, by brackets that separate, and tune.json says so.
#[test]
fn by_capacity_the_configuration_with_more_slots_carries_more_load() {
    let root = copy_of_configs();
    let o = xtask(
        root.path(),
        &[
            "tune",
            "--out",
            "runs/cap",
            "--grid",
            "scheduler.max_num_seqs=1,4",
            "--objective",
            "capacity",
            "--capacity",
            "concurrency",
            "--capacity-max",
            "8",
            "--capacity-resolution",
            "0.34",
            "--capacity-trials",
            "2..4",
            "--requests",
            "8",
            "--max-tokens",
            "8",
            "--set",
            "workload.input_lengths=[64]",
            "--set",
            "slo.ttft_ms=150",
        ],
    );
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let tune = TuneFile::read(&root.path().join("runs/cap")).unwrap();
    assert_eq!(tune.objective, xtask::tune::model::Objective::Capacity);
    let cap = |seqs: i64| {
        let r = tune
            .rows
            .iter()
            .find(|r| setting(r, "scheduler.max_num_seqs") == &serde_json::json!(seqs))
            .unwrap();
        assert_eq!(r.status, RowStatus::Measured, "{r:?}");
        r.capacity.clone().expect("a capacity row")
    };
    let (one, four) = (cap(1), cap(4));
    assert_eq!(one.dimension, "concurrency");
    let (p1, p4) = (one.bracket.pass.unwrap(), four.bracket.pass.unwrap());
    assert!(p4 > p1, "one slot {} against four {}", one.text(), four.text());
    assert!(four.bracket.separates_from(&one.bracket));
    assert_eq!(tune.winner.as_deref(), Some("max_num_seqs=4"));
    assert_eq!(tune.decided_by, Some(DecidedBy::Capacity));
    assert!(tune.capacity_overlaps.is_empty());
    let statement = tune.statement().unwrap();
    assert!(statement.contains(&format!("capacity {}", four.text())), "{statement}");
    assert!(
        o.stdout.contains("capacity") && o.stdout.contains(&one.bracket.text()),
        "{}",
        o.stdout
    );
    // Each row's figures are its passing load's trials.
    let r4 = tune.winner_row().unwrap();
    assert_eq!(
        r4.sweep_stage.as_deref(),
        Some(&*format!("capacity, passing load: concurrency {p4}"))
    );
    assert!(r4.cost_per_1m_output_tokens.is_some());
    // The record of the tune: each configuration's bracket in the Capacity at SLO column.
    let o = xtask(root.path(), &["adr", "new", "Four slots", "--tune", "runs/cap"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let record = std::fs::read_to_string(new_record(root.path())).unwrap();
    assert!(record.contains("Capacity at SLO"), "{record}");
    assert!(
        record.contains(&one.bracket.text()) && record.contains(&four.bracket.text()),
        "{record}"
    );
    assert!(record.contains("decided by capacity"), "{record}");
}

/// `--objective capacity` alone searches each configuration's capacity in concurrency.
#[test]
fn the_capacity_objective_searches_concurrency_unless_told() {
    use clap::Parser;
    let parse = |args: &[&str]| {
        let mut all = vec!["xtask", "tune", "--grid", "scheduler.max_num_seqs=1,4"];
        all.extend(args);
        match xtask::Cli::try_parse_from(all).unwrap().command {
            xtask::Command::Tune(t) => (t.objective, t.bench.capacity),
            _ => unreachable!(),
        }
    };
    use infergate_model::sweep::Dimension;
    use xtask::tune::model::Objective;
    assert_eq!(
        parse(&["--objective", "capacity"]),
        (Some(Objective::Capacity), Some(Dimension::Concurrency))
    );
    assert_eq!(parse(&["--capacity", "rate"]), (None, Some(Dimension::Rate)));
    assert_eq!(parse(&[]), (None, None));
}
