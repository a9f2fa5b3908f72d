//! The served configuration through the CLI: `bench` against a standalone simulator serving
//! another engine config than the profile's target names records what the server said and
//! the mismatch, `gate` does not pass the run (exit 7), `adr new` refuses the decision it
//! contradicts (exit 2, both values named); the embedded simulator serves its own file.

use crate::support::*;

/// A copy of the configs with `configs/engine-64.toml` (engine.toml with 64 sequences) and a
/// profile `served` whose target at `url` names `configs/engine.toml` (256).
fn repo_with_target(url: Option<&str>) -> tempfile::TempDir {
    let r = copy_of_configs();
    let engine = std::fs::read_to_string(r.path().join("configs/engine.toml")).unwrap();
    let mut doc: toml::Table = engine.parse().unwrap();
    assert_eq!(doc["scheduler"]["max_num_seqs"].as_integer(), Some(256));
    doc["scheduler"].as_table_mut().unwrap().insert("max_num_seqs".into(), 64.into());
    std::fs::write(r.path().join("configs/engine-64.toml"), toml::to_string(&doc).unwrap())
        .unwrap();
    if let Some(url) = url {
        let bench = r.path().join("configs/bench.toml");
        let mut text = std::fs::read_to_string(&bench).unwrap();
        text.push_str(&format!(
            "\n[targets.standalone]\nbase_url = \"{url}\"\n\
             model = \"sim/meta-llama/Llama-3.1-8B-Instruct\"\n\
             engine_config = \"configs/engine.toml\"\n\n\
             [profile.served]\ntarget = \"standalone\"\n"
        ));
        std::fs::write(&bench, text).unwrap();
    }
    std::fs::create_dir_all(r.path().join("thresholds")).unwrap();
    std::fs::copy(repo_root().join("thresholds/gate.toml"), r.path().join("thresholds/gate.toml"))
        .unwrap();
    std::fs::create_dir_all(r.path().join("docs/adr")).unwrap();
    r
}

const SHORT: &[&str] = &[
    "--requests",
    "8",
    "--concurrency",
    "4",
    "--max-tokens",
    "8",
    "--set",
    "load.warmup_requests=0",
];

#[test]
fn a_simulator_serving_another_engine_config_is_caught_by_gate_and_adr_new() {
    let scratch = repo_with_target(None);
    let (sim, _model, url) =
        start_sim(scratch.path(), &["--set", "sim.engine_config=configs/engine-64.toml"]);
    let r = repo_with_target(Some(&url));
    let mut args = vec!["bench", "--profile", "served", "--out", "runs/m"];
    args.extend_from_slice(SHORT);
    let o = xtask(r.path(), &args);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let console = format!("{}{}", o.stdout, o.stderr);
    assert!(
        console.contains("scheduler.max_num_seqs: configs/engine.toml says 256, the server 64"),
        "{console}"
    );
    let s = infergate_model::Summary::read(&r.path().join("runs/m")).unwrap();
    let e = s.engine.as_ref().expect("the target's engine config");
    let seqs = e.served.iter().find(|v| v.key == "scheduler.max_num_seqs").expect("read back");
    assert_eq!(seqs.value, serde_json::json!(64));
    assert_eq!(seqs.source, "GET /server_info scheduler_config.max_num_seqs");
    assert_eq!(e.mismatches.len(), 1, "{:?}", e.mismatches);
    assert!(s.notes.iter().any(|n| n.contains("served configuration differs")), "{:?}", s.notes);

    let o = xtask(r.path(), &["report", "runs/m"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let page = std::fs::read_to_string(r.path().join("runs/m/report.html")).unwrap();
    assert!(page.contains("Served configuration"), "the report has the section");
    assert!(page.contains("GET /server_info scheduler_config.max_num_seqs"), "and the source");
    assert!(page.contains("configs/engine.toml says 256, the server 64"), "and the note");

    let g = xtask(r.path(), &["gate", "runs/m"]);
    assert_eq!(g.code, 7, "{}{}", g.stdout, g.stderr);
    assert!(g.stdout.contains("served configuration: scheduler.max_num_seqs"), "{}", g.stdout);

    let a = xtask(r.path(), &["adr", "new", "Keep the baseline", "--baseline", "runs/m"]);
    assert_eq!(a.code, 2, "{}{}", a.stdout, a.stderr);
    assert!(
        a.stderr.contains("configs/engine.toml: scheduler.max_num_seqs = 256")
            && a.stderr.contains("the server ran scheduler.max_num_seqs = 64"),
        "{}",
        a.stderr
    );
    let written = std::fs::read_dir(r.path().join("docs/adr")).unwrap().count();
    assert_eq!(written, 0, "no record written");
    drop(sim);
}

#[test]
fn the_embedded_simulator_serves_the_profiles_engine_config() {
    let r = repo_with_target(None);
    let mut args = vec!["bench", "-q", "--out", "runs/e"];
    args.extend_from_slice(SHORT);
    let o = xtask(r.path(), &args);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let s = infergate_model::Summary::read(&r.path().join("runs/e")).unwrap();
    let e = s.engine.as_ref().unwrap();
    let seqs = e.served.iter().find(|v| v.key == "scheduler.max_num_seqs").expect("read back");
    assert_eq!(seqs.value, serde_json::json!(256));
    assert!(e.mismatches.is_empty(), "{:?}", e.mismatches);
    assert!(!s.notes.iter().any(|n| n.contains("served configuration")), "{:?}", s.notes);
    let a = xtask(r.path(), &["adr", "new", "Keep the baseline", "--baseline", "runs/e"]);
    assert_eq!(a.code, 0, "{}{}", a.stdout, a.stderr);
    let record = std::fs::read_dir(r.path().join("docs/adr"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "md"))
        .expect("the record");
    let text = std::fs::read_to_string(record).unwrap();
    assert!(
        text.contains("(vLLM, GET /server_info") && text.contains("`scheduler.max_num_seqs = 256`"),
        "the Reproduction section shows what the server said:\n{text}"
    );
}
