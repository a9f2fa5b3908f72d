//! Against a real engine: llama.cpp's llama-server serving Gemma 3 270M on CPU.
//!
//! Needs `LLAMA_SERVER` (the binary) and the model (`INFERGATE_MODEL`, or the cache that
//! `cargo xtask engine model` fills; `cargo xtask test` does both). Without them these tests say
//! loudly that they were skipped; under `CI=true` a missing engine is a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use infergate_model::capacity::StopReason;
use infergate_model::config::EngineConfig;
use xtask::engine_process::{self as serve, EngineProcess, ServeOptions};

/// Every scenario against llama.cpp, one after another on one test thread
/// (`a_real_engine_chain` in `main.rs` calls it). Each runs llama.cpp on every core, so two at
/// once would measure each other; and as one test the chain holds one of the harness's threads
/// from the start while the other tests share the rest, instead of eight tests waiting on a lock
/// at the end of the run. A failed scenario does not stop the chain: every scenario runs, and the
/// chain fails naming each one that failed.
pub fn chain() {
    let Some(model) = engine() else { return };
    type Scenario = (&'static str, fn(PathBuf));
    let scenarios: &[Scenario] = &[
        ("a_short_bench_against_llama_cpp", a_short_bench_against_llama_cpp),
        ("the_whole_loop_on_real_numbers", the_whole_loop_on_real_numbers),
        #[cfg(feature = "acceptance")]
        (
            "a_real_acceptance_pair_reports_the_drift_per_position",
            a_real_acceptance_pair_reports_the_drift_per_position,
        ),
        (
            "a_tune_over_llama_cpp_slots_stops_every_server",
            a_tune_over_llama_cpp_slots_stops_every_server,
        ),
        (
            "sessions_send_the_streamed_answers_back_to_llama_cpp",
            sessions_send_the_streamed_answers_back_to_llama_cpp,
        ),
        (
            "ab_gates_on_llama_cpp_pass_the_unchanged_config_and_fail_one_with_fewer_slots",
            ab_gates_on_llama_cpp_pass_the_unchanged_config_and_fail_one_with_fewer_slots,
        ),
        (
            "the_served_slots_are_read_back_and_a_server_started_otherwise_is_caught",
            the_served_slots_are_read_back_and_a_server_started_otherwise_is_caught,
        ),
        (
            "capacity_on_four_llama_cpp_slots_is_above_capacity_on_one",
            capacity_on_four_llama_cpp_slots_is_above_capacity_on_one,
        ),
    ];
    // `INFERGATE_REAL_ENGINE=name,...` runs only the scenarios named (a developer's rerun of one).
    let only: Option<Vec<String>> = std::env::var("INFERGATE_REAL_ENGINE")
        .ok()
        .filter(|v| !v.is_empty())
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let mut failed = Vec::new();
    for (name, scenario) in scenarios {
        if only.as_ref().is_some_and(|o| !o.iter().any(|n| n == name)) {
            continue;
        }
        let started = std::time::Instant::now();
        let model = model.clone();
        let outcome = std::panic::catch_unwind(move || scenario(model));
        let took = started.elapsed().as_secs_f64();
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "real engine: {name}: {} in {took:.0} s",
            if outcome.is_ok() { "ok" } else { "FAILED" }
        );
        if outcome.is_err() {
            failed.push(*name);
        }
    }
    assert!(failed.is_empty(), "real-engine scenarios failed: {}", failed.join(", "));
}

/// The model, or `None` (skipped) outside CI.
fn engine() -> Option<PathBuf> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let binary = serve::llama_server_binary();
    let model =
        std::env::var_os("INFERGATE_MODEL").map(PathBuf::from).or_else(xtask::model::cached);
    match (binary, model) {
        (Some(b), Some(m)) if b.is_file() && m.is_file() => Some(m),
        (b, m) => {
            let why = format!(
                "real-engine test SKIPPED: llama-server {} and model {} (set LLAMA_SERVER and run `cargo xtask engine model`, or use `cargo xtask test`)",
                b.map_or("not found".into(), |b| format!("at {}", b.display())),
                m.map_or("not found".into(), |m| format!("at {}", m.display()))
            );
            assert!(!ci, "CI=true: {why}");
            // Straight to the process's stderr: the test harness captures `eprintln!` of
            // passing tests, and a skip must be seen.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "\n*** {why} ***\n");
            None
        }
    }
}

fn engine_config(slots: u32) -> String {
    format!(
        "[engine]\nmodel = \"gemma-3-270m\"\nmax_model_len = 512\n\n[scheduler]\nmax_num_seqs = {slots}\n\
         max_num_batched_tokens = 512\nenable_prefix_caching = true\n"
    )
}

/// A repository root with an engine config and a bench profile for the real engine.
fn repo(port: u16, slots: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("configs")).unwrap();
    std::fs::write(dir.path().join("configs/engine-llamacpp.toml"), engine_config(slots)).unwrap();
    write_bench_config(dir.path(), port);
    dir
}

fn write_bench_config(root: &Path, port: u16) {
    let text = format!(
        "[targets.llama]\nbase_url = \"http://127.0.0.1:{port}\"\nmodel = \"gemma-3-270m\"\n\
         engine_config = \"configs/engine-llamacpp.toml\"\n\n\
         [profile.default]\ntarget = \"llama\"\n\
         [profile.default.load]\nconcurrency = 2\nrequests = 4\nwarmup_requests = 2\n\
         [profile.default.workload]\ninput_lengths = [24]\nrepeats = 4\nmax_tokens = 16\n\
         [profile.default.slo]\nttft_ms = 60000\n\
         [profile.default.client]\nrequest_timeout_s = 300\nstall_timeout_s = 120\n"
    );
    std::fs::write(root.join("configs/bench.toml"), text).unwrap();
}

fn start(root: &Path, model: &Path, slots: u32, extra: &[&str]) -> EngineProcess {
    let sh = xshell::Shell::new().unwrap();
    let config = EngineConfig::read(&root.join("configs/engine-llamacpp.toml")).unwrap();
    assert_eq!(config.scheduler.max_num_seqs, slots);
    let opts = ServeOptions {
        engine: infergate_model::EngineKind::LlamaCpp,
        config,
        model: Some(model.to_path_buf()),
        port: None,
        ready_timeout: Duration::from_secs(180),
        log: root.join(format!("engine-{slots}.log")),
        extra_args: extra.iter().map(|s| s.to_string()).collect(),
    };
    serve::start(&sh, &opts).expect("llama-server starts")
}

fn port_of(e: &EngineProcess) -> u16 {
    e.base_url.rsplit(':').next().unwrap().parse().unwrap()
}

fn xtask(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask")).arg("-C").arg(root).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn a_short_bench_against_llama_cpp(model: PathBuf) {
    let root = repo(0, 2);
    let e = start(root.path(), &model, 2, &[]);
    write_bench_config(root.path(), port_of(&e));
    let o = xtask(root.path(), &["bench", "-q", "--out", "runs/a"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let s = infergate_model::Summary::read(&root.path().join("runs/a")).unwrap();
    assert!(!s.simulated);
    assert_eq!(s.requests.ok, 4, "{:?}", s.requests.by_class);
    assert_eq!(s.tokens.from_usage, 4, "token counts come from the server's usage");
    assert_eq!(
        s.tokens.output_total,
        Some(4 * 16),
        "ignore_eos makes every request produce max_tokens"
    );
    let ttft = s.metrics.ttft_ms.as_ref().expect("TTFT measured");
    let tpot = s.metrics.tpot_ms.as_ref().expect("TPOT measured");
    assert!(ttft.min > 0.0 && ttft.max < 120_000.0, "{ttft:?}");
    assert!(tpot.min > 0.0 && tpot.max < 60_000.0, "{tpot:?}");
    assert!(s.metrics.e2e_ms.as_ref().unwrap().min >= ttft.min);
    assert_eq!(s.engine.as_ref().map(|e| e.file.as_str()), Some("configs/engine-llamacpp.toml"));
    // llama.cpp's /metrics (started with --metrics) is scraped over the measured window.
    let server = s.server.as_ref().expect("the server section is filled");
    assert_eq!(server.engine, "llamacpp", "{server:?}");
    assert!(server.scrapes >= 2, "{server:?}");
    assert_eq!(server.failed_scrapes, 0, "{server:?}");
    let generated = server.generation_tokens.expect("generation counter delta");
    assert_eq!(generated, (6 * 16) as f64, "two warmup and four measured requests: {server:?}");
    assert_eq!(
        server.goodput_ratio,
        Some(1.0),
        "every generated token reached the client: {server:?}"
    );
    // llama.cpp's own timings are kept beside the client's measurements.
    let records =
        infergate_model::rundir::read_records(&root.path().join("runs/a")).unwrap().records;
    for r in records.iter().filter(|r| !r.warmup) {
        let t = r.server_timings.as_ref().expect("llama.cpp sends `timings`");
        assert_eq!(t.predicted_n, Some(16));
        assert!(t.prompt_ms.is_some() && t.predicted_ms.is_some());
        // The server's generation time fits inside what the client saw.
        let client_ms = r.last_token_ms.unwrap() - r.sent_ms.unwrap();
        assert!(t.predicted_ms.unwrap() <= client_ms + 5.0, "{t:?} vs {client_ms}");
    }
    // Cancelled after 4 tokens: llama.cpp's own counters say whether it stopped generating
    // for the client that went away (the final scrape waits for its slots to be idle).
    let o = xtask(
        root.path(),
        &[
            "bench",
            "-q",
            "--max-tokens",
            "64",
            "--set",
            "cancel.share=0.5",
            "--set",
            "cancel.after_tokens=4",
            "--out",
            "runs/c",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let s = infergate_model::Summary::read(&root.path().join("runs/c")).unwrap();
    // Warmup requests (ids 0 and 1) are never cancelled; of the four measured, the seeded draw.
    let plan = infergate_model::config::CancelConfig {
        share: 0.5,
        after_tokens: Some(4),
        ..Default::default()
    };
    let n = (2..6).filter(|&id| plan.plan(id).is_some()).count() as u64;
    assert!((1..4).contains(&n), "the seed cancels {n} of 4: pick another");
    assert_eq!((s.requests.cancelled, s.requests.ok), (n, 4 - n), "{:?}", s.requests.by_class);
    let c = s.requests.cancellation.as_ref().unwrap();
    assert_eq!(c.tokens_received, 4 * n);
    let server = s.server.as_ref().expect("the server section is filled");
    let after = server.after_run.as_ref().expect("the engine watched after the run");
    assert!(after.idle, "llama.cpp's slots emptied after the run: {server:?}");
    let generated = server.generation_tokens.expect("generation counter delta");
    // Two warmup and the ok requests of 64 tokens each, then what the cancelled ones cost.
    let delivered = ((2 + 4 - n) * 64) as f64;
    let per_cancel = (generated - delivered) / n as f64;
    eprintln!("llama.cpp computed {per_cancel} tokens per request cancelled after 4 ({server:?})");
    // llama.cpp stops a slot whose client went away (measured: 4.67 tokens per request
    // cancelled after 4, three cancelled); one that ran on would compute all 64.
    assert!(per_cancel < 8.0, "llama.cpp went on generating: {per_cancel} tokens per cancel");
    // The summary says so from the same counters: beyond the 4 tokens each client received,
    // what llama.cpp computed for nobody, a small share of the 60 each had left.
    let waste = server.cancelled.as_ref().expect("the cancels' waste");
    let nobody = generated - delivered - (4 * n) as f64;
    assert_eq!(waste.decode_tokens, Some(nobody), "{waste:?}");
    assert_eq!(waste.tokens_left, Some(60 * n), "{waste:?}");
    assert_eq!(waste.stopped, Some(true), "{waste:?}");
    let ratio = s.goodput.token_ratio.expect("llama.cpp exposes its generation counter");
    assert_eq!(ratio, (delivered / generated * 1e6).round() / 1e6);
    e.stop();
}

/// Two slot counts -> a decision record -> accepted -> thresholds -> the gate passes on the
/// accepted run and blocks on a deliberately tighter threshold.
fn the_whole_loop_on_real_numbers(model: PathBuf) {
    let root = repo(0, 1);
    let r = root.path();
    // Baseline: one slot.
    let e = start(r, &model, 1, &[]);
    write_bench_config(r, port_of(&e));
    let o = xtask(r, &["bench", "-q", "--out", "runs/one-slot"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    e.stop();
    // Experiment: two slots.
    std::fs::write(r.join("configs/engine-llamacpp.toml"), engine_config(2)).unwrap();
    let e = start(r, &model, 2, &[]);
    write_bench_config(r, port_of(&e));
    let o = xtask(r, &["bench", "-q", "--out", "runs/two-slots"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    e.stop();

    let o = xtask(
        r,
        &[
            "adr",
            "new",
            "Serve two llama.cpp slots",
            "--baseline",
            "runs/one-slot",
            "--exp",
            "runs/two-slots",
            "--deciders",
            "test",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let adr = std::fs::read_dir(r.join("docs/adr"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("0001-"))
        .expect("ADR 0001 written");
    let written = std::fs::read_to_string(&adr).unwrap();
    assert!(
        written.contains("configs/engine-llamacpp.toml: scheduler.max_num_seqs = 2"),
        "{written}"
    );
    // The reviewer fills in what only a person can write, then accepts.
    fill_placeholders(r, &adr);
    let o = xtask(r, &["adr", "accept", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = xtask(r, &["adr", "thresholds"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The loop is checked here, not the host: under CI other tests share these cores, and the
    // gate calls a busy host's run undecidable unless told to decide anyway.
    let o = xtask(r, &["gate", "runs/two-slots", "--allow-busy-host"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the accepted run passes its own thresholds: {}",
        text(&o)
    );

    // A deliberately tighter TTFT limit blocks the same run.
    let gate = std::fs::read_to_string(r.join("thresholds/gate.toml")).unwrap();
    let mut table: toml::Table = toml::from_str(&gate).unwrap();
    let mut tightened = false;
    for t in table["threshold"].as_array_mut().unwrap() {
        if t["metric"].as_str() == Some("metrics.ttft_ms.p99") {
            t["limit"] = toml::Value::Float(1.0);
            tightened = true;
        }
    }
    assert!(tightened, "the record proposes a TTFT threshold: {gate}");
    std::fs::write(r.join("tight.toml"), toml::to_string(&table).unwrap()).unwrap();
    let o =
        xtask(r, &["gate", "runs/two-slots", "--allow-busy-host", "--thresholds", "tight.toml"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

/// Replace the `<...>` placeholders `adr lint` reports, as a reviewer would.
fn fill_placeholders(root: &Path, adr: &Path) {
    let o = xtask(root, &["adr", "lint"]);
    let report = text(&o);
    let name = adr.file_name().unwrap().to_string_lossy().into_owned();
    let lines: Vec<usize> = report
        .lines()
        .filter(|l| l.contains(&name) && l.contains("placeholder"))
        .filter_map(|l| l.split(':').nth(1)?.parse().ok())
        .collect();
    let mut text_lines: Vec<String> =
        std::fs::read_to_string(adr).unwrap().lines().map(str::to_string).collect();
    for n in lines {
        let line = &mut text_lines[n - 1];
        while let (Some(a), Some(b)) = (line.find('<'), line.find('>')) {
            if b < a {
                break;
            }
            line.replace_range(
                a..=b,
                "Reviewed on the test machine: a small CPU model under light load.",
            );
        }
    }
    std::fs::write(adr, text_lines.join("\n") + "\n").unwrap();
    let o = xtask(root, &["adr", "lint"]);
    assert_eq!(o.status.code(), Some(0), "after filling the placeholders: {}", text(&o));
}

#[cfg(feature = "acceptance")]
const ACCEPT_DATASET: &str = r#"{"id":"capital","category":"chat","messages":[{"role":"user","content":"What is the capital of France? Answer in one sentence."}],"max_tokens":16}
{"id":"count","category":"chat","messages":[{"role":"user","content":"Count from one to ten in words."}],"max_tokens":16}
{"id":"story","category":"chat","messages":[{"role":"user","content":"Write the first sentence of a story about a lighthouse keeper."}],"max_tokens":16}
{"id":"colors","category":"chat","messages":[{"role":"user","content":"List three primary colors."}],"max_tokens":16}
"#;

/// The same model served twice, the default f16 K cache against a q4_0 K cache: a real
/// precision trade-off. Greedy decoding mostly picks the same tokens while the log-probs drift;
/// the numeric layer lists the drift position by position and fails the default thresholds.
#[cfg(feature = "acceptance")]
fn a_real_acceptance_pair_reports_the_drift_per_position(model: PathBuf) {
    let root = repo(0, 2);
    let r = root.path();
    let baseline = start(r, &model, 2, &[]);
    let candidate = start(r, &model, 2, &["--cache-type-k", "q4_0"]);
    std::fs::write(
        r.join("configs/bench.toml"),
        format!(
            "[targets.f16]\nbase_url = \"{}\"\n[targets.q4k]\nbase_url = \"{}\"\n",
            baseline.base_url, candidate.base_url
        ),
    )
    .unwrap();
    std::fs::write(r.join("configs/accept.jsonl"), ACCEPT_DATASET).unwrap();
    let o = xtask(
        r,
        &[
            "acceptance",
            "-q",
            "--baseline-target",
            "f16",
            "--candidate-target",
            "q4k",
            "--dataset",
            "configs/accept.jsonl",
            "--numeric-items",
            "4",
            "--numeric-max-tokens",
            "16",
            "--concurrency",
            "2",
            "--out",
            "runs/accept",
        ],
    );
    baseline.stop();
    candidate.stop();
    assert_eq!(o.status.code(), Some(1), "the drift breaks the default thresholds: {}", text(&o));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.join("runs/accept/acceptance.json")).unwrap())
            .unwrap();
    let numeric = &report["layers"][0];
    assert_eq!(
        (numeric["name"].as_str(), numeric["verdict"].as_str()),
        (Some("numeric"), Some("fail"))
    );
    let details = &numeric["details"];
    assert_eq!(details["items"], 4, "{details}");
    assert!(details["positions_failing"].as_u64().unwrap() > 0, "{details}");
    let rtol_max = details["rtol_max"].as_f64().unwrap();
    assert!(rtol_max > 1e-3, "q4_0 keys move the log-probs: {details}");

    let lines = std::fs::read_to_string(r.join("runs/accept/numeric.jsonl")).unwrap();
    let items: Vec<serde_json::Value> =
        lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(items.len(), 4);
    let mut agreeing_positions = 0;
    let mut drifting_positions = 0;
    for item in &items {
        let per_position = item["per_position"].as_array().expect("drift listed per position");
        assert!(!per_position.is_empty(), "{item}");
        for (i, p) in per_position.iter().enumerate() {
            assert_eq!(p["position"], i, "{item}");
            match p["status"].as_str().unwrap() {
                "token" => assert_eq!(i, per_position.len() - 1, "a divergence ends the list"),
                status => {
                    agreeing_positions += 1;
                    let (cos, rtol) = (p["cos"].as_f64().unwrap(), p["rtol"].as_f64().unwrap());
                    assert!((0.0..=1.0).contains(&cos) && rtol >= 0.0, "{p}");
                    let broken = cos < 0.9995 || rtol > 1e-3;
                    assert_eq!(status != "ok", broken, "status against the thresholds: {p}");
                    if rtol > 0.0 {
                        drifting_positions += 1;
                    }
                }
            }
        }
        // The item's summary is the worst of its positions.
        let worst = per_position.iter().filter_map(|p| p["rtol"].as_f64()).reduce(f64::max);
        assert_eq!(item["rtol_max"].as_f64(), worst, "{item}");
    }
    assert!(
        agreeing_positions >= 16,
        "greedy tokens agree on most positions ({agreeing_positions} of up to 64)"
    );
    assert!(drifting_positions > 0, "log-probs drift where the tokens agree");
}

/// Live processes whose command line holds every one of `parts` (read from /proc).
fn processes_with(parts: &[&str]) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return vec![] };
    entries
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .filter(|c| parts.iter().all(|p| c.contains(p)))
        .collect()
}

/// `tune --engine llama-cpp` over slots 1, 2, 4: one llama-server per configuration, each
/// stopped after its run; the record of the tune passes lint once a reviewer fills it in.
fn a_tune_over_llama_cpp_slots_stops_every_server(model: PathBuf) {
    let root = repo(0, 2);
    let r = root.path();
    let model = model.display().to_string();
    let o = xtask(
        r,
        &[
            "tune",
            "--engine",
            "llama-cpp",
            "--gguf",
            &model,
            "--grid",
            "scheduler.max_num_seqs=1,2,4",
            "--out",
            "runs/tune",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let tune = xtask::tune::TuneFile::read(&r.join("runs/tune")).unwrap();
    assert_eq!(tune.engine_config, "configs/engine-llamacpp.toml");
    let names: Vec<&str> = tune.rows.iter().map(|row| row.name.as_str()).collect();
    assert_eq!(names, ["max_num_seqs=1", "max_num_seqs=2", "max_num_seqs=4"]);
    for row in &tune.rows {
        assert_eq!(row.status, xtask::tune::model::RowStatus::Measured, "{row:?}");
        let s = infergate_model::Summary::read(&r.join("runs/tune").join(&row.dir)).unwrap();
        assert!(!s.simulated);
        assert_eq!(s.requests.ok, 4, "{:?}", s.requests.by_class);
        // The server of this configuration is gone.
        let port =
            s.target.api_base.trim_end_matches("/v1").rsplit(':').next().unwrap().to_string();
        let left = processes_with(&["llama-server", "--port", &format!(" {port} ")]);
        assert!(left.is_empty(), "llama-server left running: {left:?}");
        let slots = row.settings[0].1.as_i64().unwrap();
        assert!(
            std::fs::read_to_string(r.join("runs/tune").join(format!("{}.engine.log", row.dir)))
                .is_ok(),
            "each engine logs beside its run"
        );
        assert_eq!(s.engine.unwrap().params["scheduler"]["max_num_seqs"], slots);
    }
    assert!(tune.winner.is_some(), "{:?}", tune.rows);
    let o = xtask(r, &["adr", "new", "Slots of the small model", "--tune", "runs/tune"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let adr = crate::support::new_record(r);
    fill_placeholders(r, &adr);
}

/// A TCP proxy on 127.0.0.1 in front of the engine that keeps every byte each way, per
/// connection: what the engine received and what it answered, apart from the bench's own
/// records. It accepts connections for at most `TAP_S` seconds.
struct Tap {
    port: u16,
    conns: Tapped,
}

type Bytes = std::sync::Arc<std::sync::Mutex<Vec<u8>>>;
type Tapped = std::sync::Arc<std::sync::Mutex<Vec<(Bytes, Bytes)>>>;
const TAP_S: u64 = 300;

fn tap(upstream: u16) -> Tap {
    use std::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let conns = Tapped::default();
    let kept = conns.clone();
    std::thread::spawn(move || {
        let until = std::time::Instant::now() + Duration::from_secs(TAP_S);
        while std::time::Instant::now() < until {
            let Ok((client, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            client.set_nonblocking(false).unwrap();
            let server = TcpStream::connect(("127.0.0.1", upstream)).unwrap();
            let (up, down) = (Bytes::default(), Bytes::default());
            kept.lock().unwrap().push((up.clone(), down.clone()));
            pump(client.try_clone().unwrap(), server.try_clone().unwrap(), up);
            pump(server, client, down);
        }
    });
    Tap { port, conns }
}

/// Copy one direction of a connection, keeping the bytes.
fn pump(mut from: std::net::TcpStream, mut to: std::net::TcpStream, keep: Bytes) {
    use std::io::{Read, Write};
    std::thread::spawn(move || {
        let mut buf = [0u8; 16384];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    keep.lock().unwrap().extend_from_slice(&buf[..n]);
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The HTTP/1.1 messages of one direction of a connection: head and body (de-chunked).
fn http_messages(mut rest: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(end) = find(rest, b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&rest[..end]).to_ascii_lowercase();
        rest = &rest[end + 4..];
        let length =
            head.lines().find_map(|l| l.strip_prefix("content-length:")?.trim().parse().ok());
        let body = if let Some(n) = length {
            let n = usize::min(n, rest.len());
            let b = rest[..n].to_vec();
            rest = &rest[n..];
            b
        } else if head.contains("transfer-encoding: chunked") {
            let mut b = Vec::new();
            while let Some(eol) = find(rest, b"\r\n") {
                let size = usize::from_str_radix(
                    String::from_utf8_lossy(&rest[..eol]).split(';').next().unwrap().trim(),
                    16,
                )
                .unwrap();
                rest = &rest[eol + 2..];
                let n = usize::min(size, rest.len());
                b.extend_from_slice(&rest[..n]);
                rest = &rest[usize::min(n + 2, rest.len())..];
                if size == 0 {
                    break;
                }
            }
            b
        } else {
            Vec::new()
        };
        out.push((head, body));
    }
    out
}

/// Each chat completion the engine served: the messages it received and the content it
/// streamed back, from the proxy's bytes.
fn chat_exchanges(tap: &Tap) -> Vec<(Vec<serde_json::Value>, String)> {
    let mut out = Vec::new();
    for (up, down) in tap.conns.lock().unwrap().iter() {
        let requests = http_messages(&up.lock().unwrap());
        let responses = http_messages(&down.lock().unwrap());
        for ((head, body), (_, answer)) in requests.iter().zip(&responses) {
            if !head.starts_with("post") || !head.contains("chat/completions") {
                continue;
            }
            let req: serde_json::Value = serde_json::from_slice(body).unwrap();
            let text: String = String::from_utf8_lossy(answer)
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .filter(|d| *d != "[DONE]")
                .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
                .filter_map(|v| v["choices"][0]["delta"]["content"].as_str().map(str::to_string))
                .collect();
            out.push((req["messages"].as_array().unwrap().clone(), text));
        }
    }
    out
}

/// Sessions against llama.cpp, seen from a proxy in front of it: each turn llama.cpp received
/// carries, as its assistant messages, the answers llama.cpp itself streamed on the session's
/// earlier turns, verbatim (not the dataset's recorded answers), and waits out the think time.
fn sessions_send_the_streamed_answers_back_to_llama_cpp(model: PathBuf) {
    let root = repo(0, 1);
    let e = start(root.path(), &model, 1, &[]);
    let proxy = tap(port_of(&e));
    std::fs::create_dir_all(root.path().join("configs/workloads")).unwrap();
    let chats: String = (0..2)
        .map(|c| {
            let turns: Vec<String> = ["Name a colour.", "Why that one?", "Say it again."]
                .iter()
                .map(|q| format!("{{\"role\": \"user\", \"content\": \"{q} ({c})\"}}, {{\"role\": \"assistant\", \"content\": \"recorded\"}}"))
                .collect();
            format!("{{\"messages\": [{}]}}\n", turns.join(", "))
        })
        .collect();
    std::fs::write(root.path().join("configs/workloads/chats.jsonl"), chats).unwrap();
    let bench_toml = format!(
        "[targets.llama]\nbase_url = \"http://127.0.0.1:{}\"\nmodel = \"gemma-3-270m\"\n\
         engine_config = \"configs/engine-llamacpp.toml\"\n\n\
         [profile.default]\ntarget = \"llama\"\n\
         [profile.default.load]\nconcurrency = 1\n\
         [profile.default.workload]\nconversations = \"configs/workloads/chats.jsonl\"\n\
         shuffle = false\nmax_tokens = 12\nignore_eos = true\n\
         [profile.default.workload.think_time_ms]\nkind = \"fixed\"\nvalue = 20\n\
         [profile.default.client]\nrequest_timeout_s = 300\nstall_timeout_s = 120\n",
        proxy.port
    );
    std::fs::write(root.path().join("configs/bench.toml"), bench_toml).unwrap();
    let o = xtask(root.path(), &["bench", "-q", "--out", "runs/s"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    e.stop();
    let s = infergate_model::Summary::read(&root.path().join("runs/s")).unwrap();
    assert_eq!(s.requests.ok, 6, "{:?}", s.requests.by_class);
    let turns: Vec<(u32, u64)> = s.turns.iter().map(|t| (t.turn, t.requests)).collect();
    assert_eq!(turns, vec![(1, 2), (2, 2), (3, 2)]);
    let mut records =
        infergate_model::rundir::read_records(&root.path().join("runs/s")).unwrap().records;
    records.sort_by_key(|r| (r.session, r.turn));
    for pair in records.windows(2).filter(|p| p[0].session == p[1].session) {
        assert!(pair[1].sent_ms.unwrap() - pair[0].end_ms >= 20.0, "think time");
    }
    // What llama.cpp received and answered, turn by turn (the preflight's probe has no
    // history). Every assistant message it received is an answer it streamed before.
    let exchanges = chat_exchanges(&proxy);
    let mut answered: Vec<String> = Vec::new();
    let mut with_history = 0;
    for (messages, answer) in &exchanges {
        let history: Vec<&str> = messages
            .iter()
            .filter(|m| m["role"] == "assistant")
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        if !history.is_empty() {
            with_history += 1;
        }
        for h in &history {
            assert!(
                answered.iter().any(|a| a == h),
                "llama.cpp received the assistant message {h:?}, which it never streamed; it streamed {answered:?}"
            );
        }
        answered.push(answer.clone());
    }
    // Turns 2 and 3 of both sessions: 1 + 2 assistant messages each time.
    assert_eq!(with_history, 4, "{exchanges:?}");
    assert!(answered.iter().all(|a| a != "recorded"));
}

/// `bench ab --engine llama-cpp` on small measurement budgets (96 and 160 requests), one llama-server
/// per arm, 4 clients, short prompts and 24-token answers (decoding dominates a request): the
/// unchanged configuration never fails (with a CPU-bound process running beside the job); a
/// candidate with 1 slot instead of 4 (three of the four clients queue behind a whole answer)
/// fails. The five-of-each check, with a candidate about 1.3x slower (3 slots: one client
/// queues) at 480 requests, is `deploy/ab-llama.sh` (docs/statistics.md); at 160 requests on a
/// CI host whose other tests share the two cores, that candidate and one with 2 slots were left
/// undecided, so CI checks the clearer slowdown.
fn ab_gates_on_llama_cpp_pass_the_unchanged_config_and_fail_one_with_fewer_slots(model: PathBuf) {
    let mut g = crate::support::gitrepo::GitRepo::init();
    g.write("configs/engine-llamacpp.toml", Some(&engine_config(4)));
    g.write("configs/bench.toml", Some("[profile.default]\n"));
    g.commit("configs");
    g.checkout();
    let model = model.display().to_string();
    let gate = |out: &str, budget: &str, extra: &[&str]| {
        let mut args = vec![
            "bench",
            "ab",
            "main",
            "--engine",
            "llama-cpp",
            "--gguf",
            &model,
            "--engine-config",
            "configs/engine-llamacpp.toml",
            "--no-history",
            "--max-requests",
            budget,
            "--trial-requests",
            "4",
            "--set",
            "load.concurrency=4",
            "--set",
            "load.warmup_requests=4",
            "--set",
            "workload.input_lengths=[8, 16, 24, 32]",
            "--set",
            "workload.max_tokens=24",
            "--out",
            out,
        ];
        args.extend_from_slice(extra);
        xtask(g.path(), &args)
    };
    let mut hog = Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
    // 24 trials: an unchanged config may stay undecided (exit 3) that early, never fail.
    let o = gate("unchanged", "96", &[]);
    hog.kill().unwrap();
    hog.wait().unwrap();
    let code = o.status.code();
    assert!(code == Some(0) || code == Some(3), "an unchanged config never fails: {}", text(&o));
    let f: infergate_model::ab::AbFile =
        infergate_model::artifact::read(&g.path().join("unchanged")).unwrap();
    assert!(f.requests <= 96, "{}", f.requests);
    let reset = |t: &infergate_model::ab::TrialEntry| {
        t.isolation.as_deref().is_some_and(|i| i.starts_with("caches reset"))
    };
    assert!(f.trials.iter().all(reset), "llama.cpp's slots are erased before every trial");
    let o = gate("slower", "160", &["--candidate-set", "scheduler.max_num_seqs=1"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

/// llama.cpp says what it serves (`GET /props`): started as its file says, the slots are read
/// back and nothing differs; started with `-np 4` against a file saying 2, the summary holds 4
/// with where it was read, the run is noted, `gate` does not pass it (exit 7) and `adr new`
/// refuses the decision line it contradicts (exit 2).
fn the_served_slots_are_read_back_and_a_server_started_otherwise_is_caught(model: PathBuf) {
    let root = repo(0, 2);
    let r = root.path();
    std::fs::create_dir_all(r.join("docs/adr")).unwrap();
    let o = xtask(r, &["adr", "thresholds"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let short = |out: &str| -> Output {
        let args = ["bench", "--requests", "2", "--max-tokens", "4", "--set"];
        let mut args = args.to_vec();
        args.extend(["load.warmup_requests=0", "--out", out]);
        xtask(r, &args)
    };
    let slots = |s: &infergate_model::Summary| {
        let e = s.engine.as_ref().expect("the target's engine config");
        let v = e.served.iter().find(|v| v.key == "scheduler.max_num_seqs").expect("read back");
        (v.value.clone(), v.source.clone())
    };

    // As the file says (2 slots of 512 tokens).
    let e = start(r, &model, 2, &[]);
    write_bench_config(r, port_of(&e));
    let o = short("runs/as-file");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    e.stop();
    let s = infergate_model::Summary::read(&r.join("runs/as-file")).unwrap();
    assert_eq!(slots(&s), (serde_json::json!(2), "GET /props total_slots".to_string()));
    let engine = s.engine.as_ref().unwrap();
    assert_eq!(engine.served_by.as_deref(), Some("llama.cpp"));
    let ctx = engine.served.iter().find(|v| v.key == "engine.max_model_len").unwrap();
    assert_eq!(ctx.value, serde_json::json!(512), "one slot's context: {ctx:?}");
    assert!(engine.mismatches.is_empty(), "{:?}", engine.mismatches);
    assert!(!s.notes.iter().any(|n| n.contains("served configuration")), "{:?}", s.notes);

    // Four slots (the same 512 tokens each) while the file says 2.
    let e = start(r, &model, 2, &["-np", "4", "-c", "2048"]);
    write_bench_config(r, port_of(&e));
    let o = short("runs/np4");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    e.stop();
    assert!(
        text(&o).contains(
            "scheduler.max_num_seqs: configs/engine-llamacpp.toml says 2, the server 4 \
             (GET /props total_slots)"
        ),
        "the console says so: {}",
        text(&o)
    );
    let s = infergate_model::Summary::read(&r.join("runs/np4")).unwrap();
    assert_eq!(slots(&s), (serde_json::json!(4), "GET /props total_slots".to_string()));
    let m = &s.engine.as_ref().unwrap().mismatches;
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!((m[0].config.clone(), m[0].served.clone()), (2.into(), 4.into()));
    assert!(s.notes.iter().any(|n| n.contains("served configuration differs")), "{:?}", s.notes);

    let o = xtask(r, &["gate", "runs/np4", "--allow-busy-host"]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    let o = xtask(r, &["gate", "runs/as-file", "--allow-busy-host"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = xtask(r, &["adr", "new", "Two slots", "--baseline", "runs/np4"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("configs/engine-llamacpp.toml: scheduler.max_num_seqs = 2")
            && text(&o).contains("the server ran scheduler.max_num_seqs = 4"),
        "{}",
        text(&o)
    );
}

/// The TTFT objective of the capacity searches: a third of the median end-to-end time of one
/// request at a time on `port` (the searches' workload), so the SLO follows how fast this machine
/// runs the model: a request that starts at once meets it, one that waits for another's whole
/// answer misses it.
fn ttft_objective_ms(root: &Path, port: u16) -> f64 {
    write_capacity_config(root, port, 600_000.0);
    let args = ["bench", "-q", "--concurrency", "1", "--requests", "8", "--out", "runs/single"];
    let o = xtask(root, &args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let s = infergate_model::Summary::read(&root.join("runs/single")).unwrap();
    (s.metrics.e2e_ms.expect("E2E measured").p50 / 3.0).round()
}

/// A profile for a capacity search on llama.cpp: answers of 24 tokens (`ignore_eos`), 8 measured
/// requests a trial (4 x concurrency above 2), and a TTFT objective of `ttft_ms`.
fn write_capacity_config(root: &Path, port: u16, ttft_ms: f64) {
    let text = format!(
        "[targets.llama]\nbase_url = \"http://127.0.0.1:{port}\"\nmodel = \"gemma-3-270m\"\n\
         engine_config = \"configs/engine-llamacpp.toml\"\n\n\
         [profile.default]\ntarget = \"llama\"\n\
         [profile.default.load]\nconcurrency = 1\nrequests = 8\n\
         [profile.default.workload]\ninput_lengths = [24]\nrepeats = 4\nmax_tokens = 24\nignore_eos = true\n\
         [profile.default.slo]\nttft_ms = {ttft_ms}\n\
         [profile.default.client]\nrequest_timeout_s = 120\nstall_timeout_s = 60\n"
    );
    std::fs::write(root.join("configs/bench.toml"), text).unwrap();
}

/// Capacity under the SLO on llama.cpp: the same search (closed loop up to concurrency 6, a TTFT
/// objective of a third of one request's time, half of the requests within it, a budget of
/// requests) on 4 slots ends within its budget with a bracket, and on 1 slot lower: one slot
/// starts a second client's request only after the first one's whole answer, where four start
/// up to four at once. A trial of 8 requests reads attainment in eighths: the target of 0.5 lies
/// between what 1 slot (0) and 4 slots (0.75 and more) reach at concurrency 2, not on a value
/// both can read. Every trial starts with the engine's caches reset. llama.cpp runs on one
/// thread here: on two, a test on the harness's other thread holding one core stalls every
/// step at llama.cpp's barrier between its threads, and a trial read 0.5 at concurrency 2 on 4
/// slots (and 0.625 at concurrency 1 on 1 slot) where on one thread they read 0.75 and 1.
fn capacity_on_four_llama_cpp_slots_is_above_capacity_on_one(model: PathBuf) {
    let started = std::time::Instant::now();
    const BUDGET: u64 = 400;
    let mut objective = None;
    let mut searched = Vec::new();
    for slots in [4, 1] {
        let root = repo(0, slots);
        let r = root.path();
        let e = start(r, &model, slots, &["--threads", "1"]);
        let ttft_ms = *objective.get_or_insert_with(|| ttft_objective_ms(r, port_of(&e)));
        write_capacity_config(r, port_of(&e), ttft_ms);
        let o = xtask(
            r,
            &[
                "bench",
                "-q",
                "--capacity",
                "concurrency",
                "--capacity-max",
                "6",
                "--capacity-resolution",
                "0.3",
                "--capacity-target",
                "0.5",
                "--capacity-trials",
                "2..4",
                "--capacity-budget",
                &BUDGET.to_string(),
                "--warmup-fraction",
                "0.2",
                "--out",
                "runs/capacity",
            ],
        );
        drop(e);
        let f = xtask_capacity(r, &o);
        assert!(f.search.spent_requests <= BUDGET, "{slots} slots: {}", f.search.spent_requests);
        assert_ne!(f.search.stop, Some(StopReason::Interrupted), "{slots} slots: {:?}", f.notes);
        // Every trial starts with the engine's caches reset, as a trial set's do.
        for t in f.search.probes.iter().flat_map(|p| &p.trials) {
            let dir = r.join("runs/capacity").join(t.dir.as_deref().unwrap());
            let s = infergate_model::summary::Summary::read(&dir).unwrap();
            let iso = s.isolation.expect("isolation recorded");
            assert!(iso.done(), "{}: {}", dir.display(), iso.text());
        }
        eprintln!(
            "{slots} slots: capacity {} (binding {:?}, stop {:?}), {} probes, {} trials, \
             {} requests, {:.0} s; TTFT objective {ttft_ms} ms",
            f.bracket.text(),
            f.binding,
            f.search.stop,
            f.search.probes.len(),
            f.search.trials,
            f.search.spent_requests,
            f.search.spent_s
        );
        for p in &f.search.probes {
            let per_trial: Vec<String> =
                p.trials.iter().map(|t| format!("{:?}", t.attainment)).collect();
            eprintln!(
                "  concurrency {}: {:?} {:?} {}",
                p.load,
                p.verdict,
                p.reason,
                per_trial.join(" ")
            );
        }
        searched.push(f);
    }
    let (four, one) = (&searched[0].bracket, &searched[1].bracket);
    let pass = four.pass.expect("4 slots hold the SLO at some load");
    let lower = one.pass.is_some_and(|p| p < pass) || one.fail.is_some_and(|f| f <= pass);
    assert!(lower, "1 slot {} is not below 4 slots {}", one.text(), four.text());
    eprintln!("both searches in {:.0?}", started.elapsed());
}

/// The capacity search `o` wrote into `root/runs/capacity`, having ended with a decided end of
/// its bracket (exit 0: a load held the SLO; 1: none did).
fn xtask_capacity(root: &Path, o: &Output) -> infergate_model::capacity::CapacityFile {
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(o));
    let f = infergate_model::capacity::CapacityFile::read(&root.join("runs/capacity")).unwrap();
    assert!(f.bracket.pass.is_some() || f.bracket.fail.is_some(), "{}", text(o));
    f
}
