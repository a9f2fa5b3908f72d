//! Acceptance against simulators: identical engines pass every layer; a candidate whose
//! log-probs drift fails the numeric layer with the expected values (and the later layers are
//! skipped); a candidate that corrupts structured outputs fails the business layer with the
//! failing items written out; logits dumps compare without any target.

use std::path::Path;

use crate::support::*;
use bench::accept::driver::{self, AcceptSpec, TargetSpec};
use bench::accept::{self, LayerOutcome, dataset};
use infergate_model::config::{Target, TimingConfig};
use infergate_sim::{SimHandle, SimOptions};

fn target(h: &SimHandle) -> Target {
    Target {
        base_url: h.base_url(),
        model: Some(h.model().to_string()),
        api_key_env: None,
        engine_config: None,
        max_tokens_field: Default::default(),
        metrics_url: None,
        description: None,
        headers: Default::default(),
        ca_bundle: None,
    }
}

async fn sims(candidate: SimOptions) -> (SimHandle, SimHandle) {
    let timing = TimingConfig {
        ttft_ms: 20.0,
        itl_ms: 25.0,
        tokens_per_chunk: 1,
        ..TimingConfig::default()
    };
    let b = start_timing_sim(timing.clone(), SimOptions::default()).await;
    let c = start_timing_sim(timing, candidate).await;
    (b, c)
}

fn spec(dir: &Path, b: &SimHandle, c: &SimHandle, items: usize) -> AcceptSpec {
    let data = dir.join("dataset.jsonl");
    std::fs::write(&data, dataset::to_jsonl(&dataset::generate(items, 3))).unwrap();
    let mut s = AcceptSpec::new(dir.join("accept"), "acc".into());
    s.baseline = Some(TargetSpec { name: "fp16".into(), target: target(b), engine: None });
    s.candidate = Some(TargetSpec { name: "fp8".into(), target: target(c), engine: None });
    s.dataset = Some(data);
    s.dataset_name = Some("configs/accept.jsonl".into());
    s.concurrency = 4;
    s.numeric_items = 6;
    s.numeric_max_tokens = 12;
    s.max_tokens = 16;
    s
}

/// Shorter outputs keep the test quick: cap every item's max_tokens.
fn cap_dataset(s: &AcceptSpec) {
    let p = s.dataset.as_ref().unwrap();
    let text = std::fs::read_to_string(p).unwrap();
    let capped: Vec<String> = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v.get("schema").is_none() {
                v["max_tokens"] = serde_json::json!(12);
            }
            v.to_string()
        })
        .collect();
    std::fs::write(p, capped.join("\n") + "\n").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_engines_pass_every_layer() {
    let dir = tempfile::tempdir().unwrap();
    let (b, c) = sims(SimOptions::default()).await;
    let s = spec(dir.path(), &b, &c, 20);
    cap_dataset(&s);
    let out = s.out_dir.clone();
    let r = driver::run(s).await.unwrap();
    b.shutdown().await;
    c.shutdown().await;
    let numeric = r.layer("numeric").unwrap();
    assert_eq!(numeric.verdict, LayerOutcome::Pass, "{:#?}", r);
    assert_eq!(numeric.checks[0].value, Some(1.0));
    assert_eq!(numeric.checks[1].value, Some(0.0));
    assert_eq!(numeric.details["items"], 6);
    assert_eq!(r.layer("engine").unwrap().verdict, LayerOutcome::Pass, "{:#?}", r.layer("engine"));
    let business = r.layer("business").unwrap();
    assert_eq!(business.verdict, LayerOutcome::Pass, "{business:#?}");
    assert_eq!(business.details["candidate"]["structured"], 9);
    assert!(r.passed);
    // The run directory: report, two normal run directories with extra.acceptance.
    let report: accept::AcceptanceReport =
        serde_json::from_str(&std::fs::read_to_string(out.join("acceptance.json")).unwrap())
            .unwrap();
    assert_eq!(report, r);
    for role in ["baseline", "candidate"] {
        let s = infergate_model::Summary::read(&out.join(role)).unwrap();
        assert_eq!(s.requests.ok, 20, "{role}");
        assert!(s.simulated, "{role}: the simulator announced itself on /v1/models");
        let section = s.extra.acceptance.as_ref().expect("the acceptance section");
        assert_eq!(section.role, role);
        assert!(section.passed);
        assert_eq!(
            s.metric(infergate_model::metric::MetricPath::named(
                "extra.acceptance.numeric.cos_min"
            )),
            Some(1.0)
        );
        assert_eq!(
            s.metric(infergate_model::metric::MetricPath::named(
                "extra.acceptance.business.schema_pass_rate"
            )),
            Some(1.0)
        );
        assert_eq!(
            infergate_model::rundir::read_records(&out.join(role)).unwrap().records.len(),
            20
        );
        // The dataset is the summary's workload file, with its content's hash (a record cites
        // it, and its provenance when it was refreshed).
        let text = std::fs::read(dir.path().join("dataset.jsonl")).unwrap();
        let file = infergate_model::workload::WorkloadFile::of("configs/accept.jsonl", &text);
        assert_eq!(s.workload.files, vec![file], "{role}");
    }
    assert_eq!(std::fs::read_to_string(out.join("business-failures.jsonl")).unwrap(), "");
    assert_eq!(std::fs::read_to_string(out.join("numeric.jsonl")).unwrap().lines().count(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drifting_logprobs_fail_the_numeric_layer_and_stop_the_later_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (b, c) = sims(SimOptions { logprob_drift: 2e-3, ..SimOptions::default() }).await;
    let s = spec(dir.path(), &b, &c, 8);
    let r = driver::run(s).await.unwrap();
    b.shutdown().await;
    c.shutdown().await;
    let numeric = r.layer("numeric").unwrap();
    assert_eq!(numeric.verdict, LayerOutcome::Fail);
    // Every log-prob is off by exactly 0.2%: the max relative error is the drift, and the
    // cosine of two nearly parallel vectors stays above its threshold.
    let rtol = numeric.checks[1].value.unwrap();
    assert!((rtol - 2e-3).abs() < 1e-9, "{rtol}");
    let cos = numeric.checks[0].value.unwrap();
    assert!(cos < 1.0 && cos > 0.9999, "{cos}");
    assert!(numeric.checks[0].passed && !numeric.checks[1].passed);
    assert_eq!(r.actions, vec!["max relative error: flag operator overflow".to_string()]);
    let first = &numeric.details["first_divergence"];
    assert_eq!((first["item"].as_u64(), first["position"].as_u64()), (Some(0), Some(0)));
    assert_eq!(first["reason"], "rtol");
    assert_eq!(r.layer("engine").unwrap().verdict, LayerOutcome::Skipped);
    assert_eq!(r.layer("business").unwrap().verdict, LayerOutcome::Skipped);
    assert!(!r.passed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupted_structured_outputs_fail_the_business_layer() {
    let dir = tempfile::tempdir().unwrap();
    let (b, c) = sims(SimOptions { corruption_rate: 0.3, ..SimOptions::default() }).await;
    let mut s = spec(dir.path(), &b, &c, 40);
    cap_dataset(&s);
    s.numeric_items = 2;
    let out = s.out_dir.clone();
    let r = driver::run(s).await.unwrap();
    b.shutdown().await;
    c.shutdown().await;
    assert_eq!(r.layer("numeric").unwrap().verdict, LayerOutcome::Pass);
    assert_eq!(r.layer("engine").unwrap().verdict, LayerOutcome::Pass, "{:#?}", r.layer("engine"));
    let business = r.layer("business").unwrap();
    assert_eq!(business.verdict, LayerOutcome::Fail);
    let structured = business.details["candidate"]["structured"].as_u64().unwrap();
    let valid = business.details["candidate"]["valid"].as_u64().unwrap();
    assert_eq!(structured, 18);
    assert_eq!(business.details["baseline"]["valid"], 18, "the baseline does not corrupt");
    let failures: Vec<accept::business::SchemaFailure> =
        std::fs::read_to_string(out.join("business-failures.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    assert!(!failures.is_empty());
    assert_eq!(failures.len() as u64, structured - valid);
    let items = dataset::load(&dir.path().join("dataset.jsonl"), 16).unwrap();
    for f in &failures {
        assert_eq!(f.target, "candidate");
        // Each written output really fails its item's schema (truncated or wrong shape).
        let schema = items[f.item].schema.as_ref().unwrap();
        assert!(accept::business::validate(schema, f.output.as_deref()).is_err());
    }
    assert_eq!(r.actions, vec!["JSON Schema pass rate: refuse release".to_string()]);
    assert!(!r.passed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logits_files_alone_run_the_numeric_layer() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, data: &[f32]| {
        use npyz::WriterBuilder;
        let mut buf = Vec::new();
        let mut w = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&[2, 4])
            .writer(&mut buf)
            .begin_nd()
            .unwrap();
        w.extend(data.iter().copied()).unwrap();
        w.finish().unwrap();
        std::fs::write(dir.path().join(name), buf).unwrap();
        dir.path().join(name)
    };
    let b = write("b.npy", &[1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 0.25, 0.0]);
    let c = write("c.npy", &[1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 0.25, 0.0]);
    let mut s = AcceptSpec::new(dir.path().join("acc"), "npy".into());
    s.logits = Some((b, c));
    let r = driver::run(s).await.unwrap();
    let numeric = r.layer("numeric").unwrap();
    assert_eq!(numeric.verdict, LayerOutcome::Pass);
    assert_eq!(numeric.details["positions"], 2);
    assert_eq!(r.layer("engine").unwrap().verdict, LayerOutcome::NotRun);
    assert!(r.passed);
}
